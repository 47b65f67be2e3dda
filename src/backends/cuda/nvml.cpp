// SPDX-License-Identifier: Apache-2.0
// NVML loader: dlopen once, dlsym the few entry points used, pair each symbol with the struct layout it expects.
#include "backends/cuda/nvml.hpp"

#include <dlfcn.h>

#include <climits>
#include <cstddef>
#include <mutex>
#include <utility>

namespace moebench {
namespace {

extern "C" {
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlReturn_t;
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;
}
static_assert(sizeof(nvmlFieldValue_t) == 40 && offsetof(nvmlFieldValue_t, value) == 32, "NVML 13 layout");

constexpr int kNvmlSuccess = 0;
constexpr unsigned kClockGraphics = 0, kClockSm = 1, kClockMem = 2;
constexpr unsigned kTemperatureGpu = 0;
constexpr unsigned kFieldNvlinkLinkCount = 91;
// nvmlClocksEventReasons bits that mean the clock was held down (not idle, not an application clock setting).
constexpr unsigned long long kReasonSwPowerCap = 0x4, kReasonHwSlowdown = 0x8, kReasonSwThermal = 0x20,
                             kReasonHwThermal = 0x40, kReasonHwPowerBrake = 0x80;
constexpr unsigned kFieldNvlinkThroughputDataTx = 138;  // KiB, cumulative
constexpr unsigned kFieldNvlinkThroughputDataRx = 139;
// Value types of nvmlFieldValue_t.valueType.
constexpr int kValDouble = 0, kValUInt = 1, kValULong = 2, kValULongLong = 3, kValSLongLong = 4, kValSInt = 5,
              kValUShort = 6;

struct Nvml {
    bool ok = false;
    std::string why;
    nvmlReturn_t (*init)() = nullptr;
    const char* (*error_string)(nvmlReturn_t) = nullptr;
    nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
    nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
    nvmlReturn_t (*clock)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
    nvmlReturn_t (*max_clock)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
    nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
    nvmlReturn_t (*event_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;  // clock event (throttle) reasons
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;         // mJ since the driver loaded

    std::string err(nvmlReturn_t r) const {
        return error_string ? std::string(error_string(r)) : "NVML error " + std::to_string(r);
    }
};

// Loaded once per process; the handle is never closed (NVML keeps driver state for the process lifetime).
const Nvml& nvml() {
    static Nvml n;
    static std::once_flag once;
    std::call_once(once, [] {
        void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* e = dlerror();
            n.why = std::string("not available: ") + (e ? e : "dlopen(libnvidia-ml.so.1) failed");
            return;
        }
        auto sym = [&](const char* name) { return dlsym(h, name); };
        void* init = sym("nvmlInit_v2");
        if (!init) init = sym("nvmlInit");
        n.init = reinterpret_cast<nvmlReturn_t (*)()>(init);
        n.error_string = reinterpret_cast<const char* (*)(nvmlReturn_t)>(sym("nvmlErrorString"));
        n.driver_version = reinterpret_cast<nvmlReturn_t (*)(char*, unsigned)>(sym("nvmlSystemGetDriverVersion"));
        n.by_pci =
            reinterpret_cast<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
        n.clock = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
        n.max_clock =
            reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*)>(sym("nvmlDeviceGetMaxClockInfo"));
        n.power = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>(sym("nvmlDeviceGetPowerUsage"));
        n.power_limit =
            reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>(sym("nvmlDeviceGetEnforcedPowerLimit"));
        n.temperature =
            reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*)>(sym("nvmlDeviceGetTemperature"));
        n.field_values =
            reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*)>(sym("nvmlDeviceGetFieldValues"));
        void* reasons = sym("nvmlDeviceGetCurrentClocksEventReasons");
        if (!reasons) reasons = sym("nvmlDeviceGetCurrentClocksThrottleReasons");  // the pre-12.2 name
        n.event_reasons = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(reasons);
        n.energy = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
            sym("nvmlDeviceGetTotalEnergyConsumption"));
        if (!n.init || !n.by_pci) {
            n.why = "not available: libnvidia-ml.so.1 lacks nvmlInit/nvmlDeviceGetHandleByPciBusId_v2";
            return;
        }
        const nvmlReturn_t r = n.init();
        if (r != kNvmlSuccess) {
            n.why = "not available: nvmlInit failed: " + n.err(r);
            return;
        }
        n.ok = true;
    });
    return n;
}

json field_value_json(const nvmlFieldValue_t& v, const Nvml& n) {
    if (v.nvmlReturn != kNvmlSuccess) return "not available: " + n.err(v.nvmlReturn);
    switch (v.valueType) {
        case kValDouble: return v.value.dVal;
        case kValUInt: return v.value.uiVal;
        case kValULong: return static_cast<unsigned long long>(v.value.ulVal);
        case kValULongLong: return v.value.ullVal;
        case kValSLongLong: return v.value.sllVal;
        case kValSInt: return v.value.siVal;
        case kValUShort: return v.value.usVal;
        default: return "not available: unknown NVML value type " + std::to_string(v.valueType);
    }
}

std::string throttle_reason_names(unsigned long long bits) {
    std::string out;
    for (auto [bit, name] : {std::pair{kReasonSwPowerCap, "software power cap"},
                             {kReasonHwSlowdown, "hardware slowdown"},
                             {kReasonSwThermal, "software thermal slowdown"},
                             {kReasonHwThermal, "hardware thermal slowdown"},
                             {kReasonHwPowerBrake, "power brake"}})
        if (bits & bit) out += (out.empty() ? "" : ", ") + std::string(name);
    return out;
}

}  // namespace

json nvml_counters(const std::string& pci_bus_id) {
    const Nvml& n = nvml();
    if (!n.ok) return json{{"available", false}, {"reason", n.why}};
    nvmlDevice_t dev = nullptr;
    const nvmlReturn_t r = n.by_pci(pci_bus_id.c_str(), &dev);
    if (r != kNvmlSuccess)
        return json{{"available", false}, {"reason", "nvmlDeviceGetHandleByPciBusId_v2: " + n.err(r)}};
    json c = {{"available", true}};
    unsigned mhz = 0, temp = 0;
    unsigned long long bits = 0, mj = 0;
    if (n.clock && n.clock(dev, kClockSm, &mhz) == kNvmlSuccess) c["sm_clock_mhz"] = mhz;
    if (n.temperature && n.temperature(dev, kTemperatureGpu, &temp) == kNvmlSuccess) c["temperature_c"] = temp;
    if (n.event_reasons && n.event_reasons(dev, &bits) == kNvmlSuccess) c["clock_event_reasons"] = bits;
    if (n.energy && n.energy(dev, &mj) == kNvmlSuccess) c["energy_mj"] = mj;
    return c;
}

json nvml_conditions(const json& before, const json& after, int64_t tokens) {
    if (!before.value("available", false) || !after.value("available", false))
        return json{
            {"source", "counter"},
            {"throttled", nullptr},
            {"note", "NVML not available: throttling unknown"},
            {"energy", {{"available", false}, {"reason", before.value("reason", std::string("NVML not available"))}}}};
    json d = {{"source", "counter"}};
    if (before.contains("sm_clock_mhz") && after.contains("sm_clock_mhz"))
        d["sm_clock_mhz"] = {{"start", before["sm_clock_mhz"]}, {"end", after["sm_clock_mhz"]}};
    if (before.contains("temperature_c") && after.contains("temperature_c"))
        d["temperature_c"] = {{"start", before["temperature_c"]}, {"end", after["temperature_c"]}};
    if (before.contains("clock_event_reasons") && after.contains("clock_event_reasons")) {
        const unsigned long long bits = before["clock_event_reasons"].get<unsigned long long>() |
                                        after["clock_event_reasons"].get<unsigned long long>();
        const std::string names = throttle_reason_names(bits);
        d["clock_event_reasons"] = bits;
        d["throttled"] = !names.empty();
        d["note"] = names.empty() ? "no power or thermal clock limit at the start or the end of the measured steps"
                                  : "clock held down by: " + names + " (sampled at the start and the end)";
    } else {
        d["throttled"] = nullptr;
        d["note"] = "NVML gives no clock event reasons on this device: throttling unknown";
    }
    if (before.contains("energy_mj") && after.contains("energy_mj") && tokens > 0) {
        const double joules = static_cast<double>(after["energy_mj"].get<unsigned long long>() -
                                                  before["energy_mj"].get<unsigned long long>()) *
                              1e-3;
        d["energy"] = {{"source", "counter"},
                       {"scope", "the whole GPU (nvmlDeviceGetTotalEnergyConsumption)"},
                       {"joules", joules},
                       {"joules_per_token", joules / static_cast<double>(tokens)}};
    } else {
        d["energy"] = {{"available", false}, {"reason", "nvmlDeviceGetTotalEnergyConsumption not supported here"}};
    }
    return d;
}

std::string nvml_driver_version(std::string* why) {
    const Nvml& n = nvml();
    if (!n.ok || !n.driver_version) {
        if (why) *why = n.ok ? "not available: nvmlSystemGetDriverVersion missing" : n.why;
        return "";
    }
    char buf[96] = {0};
    const nvmlReturn_t r = n.driver_version(buf, sizeof(buf));
    if (r != kNvmlSuccess) {
        if (why) *why = "not available: " + n.err(r);
        return "";
    }
    return buf;
}

json nvml_device_json(const std::string& pci_bus_id) {
    const Nvml& n = nvml();
    json out;
    if (!n.ok) return json{{"available", false}, {"reason", n.why}};
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t r = n.by_pci(pci_bus_id.c_str(), &dev);
    if (r != kNvmlSuccess) {
        return json{{"available", false},
                    {"reason", "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id + "): " + n.err(r)}};
    }
    out["available"] = true;
    out["source"] = "counter";
    auto uint_or_na = [&](auto fn, auto... args) -> json {
        if (!fn) return "not available: symbol missing";
        unsigned v = 0;
        const nvmlReturn_t rr = fn(dev, args..., &v);
        if (rr != kNvmlSuccess) return "not available: " + n.err(rr);
        return v;
    };
    out["clocks_mhz"] = {{"sm", uint_or_na(n.clock, kClockSm)},
                         {"graphics", uint_or_na(n.clock, kClockGraphics)},
                         {"memory", uint_or_na(n.clock, kClockMem)},
                         {"sm_max", uint_or_na(n.max_clock, kClockSm)},
                         {"memory_max", uint_or_na(n.max_clock, kClockMem)}};
    json power_mw = uint_or_na(n.power);
    json limit_mw = uint_or_na(n.power_limit);
    out["power_w"] = power_mw.is_number() ? json(power_mw.get<double>() / 1000.0) : power_mw;
    out["power_limit_w"] = limit_mw.is_number() ? json(limit_mw.get<double>() / 1000.0) : limit_mw;
    out["temperature_c"] = uint_or_na(n.temperature, kTemperatureGpu);
    if (n.field_values) {
        // scopeId = UINT_MAX sums the throughput counters over all links (NVML header comment).
        nvmlFieldValue_t fv[3] = {};
        fv[0].fieldId = kFieldNvlinkLinkCount;
        fv[1].fieldId = kFieldNvlinkThroughputDataTx;
        fv[1].scopeId = UINT_MAX;
        fv[2].fieldId = kFieldNvlinkThroughputDataRx;
        fv[2].scopeId = UINT_MAX;
        r = n.field_values(dev, 3, fv);
        if (r != kNvmlSuccess) {
            out["nvlink"] = "not available: nvmlDeviceGetFieldValues: " + n.err(r);
        } else {
            out["nvlink"] = {{"link_count", field_value_json(fv[0], n)},
                             {"data_tx_kib_cumulative", field_value_json(fv[1], n)},
                             {"data_rx_kib_cumulative", field_value_json(fv[2], n)}};
        }
    } else {
        out["nvlink"] = "not available: nvmlDeviceGetFieldValues missing";
    }
    return out;
}

}  // namespace moebench
