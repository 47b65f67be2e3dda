// SPDX-License-Identifier: Apache-2.0
// safetensors: round trip, a hand-assembled file read byte for byte, and malformed files rejected by name.
#include "common/error.hpp"
#include "common/tensor_file.hpp"

#include "cli_helpers.hpp"
#include "error_helpers.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace moebench;

namespace {

/// Writes 8-byte little-endian header length + header + data, exactly as the format defines it.
std::string write_raw(const std::string& dir, const std::string& name, const std::string& header,
                      const std::string& data, int64_t header_len_override = -1) {
    std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    uint64_t len = header_len_override >= 0 ? uint64_t(header_len_override) : header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << data;
    return path;
}

std::string error_of(const std::string& path) {
    return test::config_error_of([&] { read_safetensors(path); });
}

}  // namespace

TEST_CASE("safetensors round trip keeps tensors, dtypes, shapes and metadata", "[tensor_file]") {
    std::string dir = test::temp_dir("st");
    const float f[] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, 7.0f};
    const int32_t i[] = {1, -1, 2147483647};
    const int64_t l[] = {0, 5, int64_t(1) << 40};
    TensorFile tf;
    tf.tensors.push_back(NamedTensor::f32("w", {2, 3}, f));
    tf.tensors.push_back(NamedTensor::i32("ids", {3}, i));
    tf.tensors.push_back(NamedTensor::i64("starts", {3}, l));
    tf.tensors.push_back(NamedTensor::f32("empty", {0, 4}, nullptr));
    tf.metadata = {{"model", "x"}, {"note", "a \"quoted\" value"}};
    write_safetensors(dir + "/a.safetensors", tf);

    TensorFile back = read_safetensors(dir + "/a.safetensors");
    REQUIRE(back.tensors.size() == 4);
    CHECK(back.metadata == tf.metadata);
    CHECK(back.find("w")->shape == std::vector<int64_t>{2, 3});
    CHECK(back.find("w")->as_f32() == std::vector<float>(f, f + 6));
    CHECK(back.find("ids")->as_i32() == std::vector<int32_t>(i, i + 3));
    CHECK(back.find("ids")->as_i64() == std::vector<int64_t>{1, -1, 2147483647});
    CHECK(back.find("starts")->as_i64() == std::vector<int64_t>(l, l + 3));
    CHECK(back.find("empty")->numel() == 0);
    CHECK(back.find("nope") == nullptr);
    CHECK_THROWS_AS(back.find("starts")->as_i32(), ConfigError);  // 2^40 does not fit
    CHECK_THROWS_AS(back.find("ids")->as_f32(), ConfigError);

    // The data section starts 8-byte aligned and no temporary file is left behind.
    std::ifstream in(dir + "/a.safetensors", std::ios::binary);
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char*>(&header_len), 8);
    CHECK(header_len % 8 == 0);
    int64_t files = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
    CHECK(files == 1);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a hand-assembled safetensors file reads as the format defines", "[tensor_file]") {
    std::string dir = test::temp_dir("st");
    int32_t vals[2] = {7, -3};
    float fv = 0.5f;
    std::string data(reinterpret_cast<const char*>(vals), 8);
    data.append(reinterpret_cast<const char*>(&fv), 4);
    // Keys out of data order and trailing spaces in the header are both allowed.
    std::string header = R"({"b":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
                         R"("a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}   )";
    TensorFile f = read_safetensors(write_raw(dir, "h.safetensors", header, data));
    REQUIRE(f.tensors.size() == 2);
    CHECK(f.tensors[0].name == "a");  // data order
    CHECK(f.find("a")->as_i32() == std::vector<int32_t>{7, -3});
    CHECK(f.find("b")->shape.empty());
    CHECK(f.find("b")->as_f32() == std::vector<float>{0.5f});
    CHECK(f.metadata.at("k") == "v");
    std::filesystem::remove_all(dir);
}

TEST_CASE("malformed safetensors files are ConfigErrors naming the file", "[tensor_file]") {
    std::string dir = test::temp_dir("st");
    const std::string d8(8, '\0');
    auto hdr = [](const std::string& dtype, const std::string& shape, const std::string& offs) {
        return R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offs + "}}";
    };
    struct Case {
        const char* name;
        std::string header, data;
        int64_t len_override;
        const char* expect;
    };
    std::vector<Case> cases = {
        {"short", "", "", -1, "shorter than"},
        {"len", "{}", "", 1000, "exceeds the file size"},
        {"json", "{not json", "", -1, "not valid JSON"},
        {"notobj", "[1,2]", "", -1, "does not start with"},
        {"dtype", hdr("Q7", "[2]", "[0,8]"), d8, -1, "unknown dtype"},
        {"beyond", hdr("I32", "[2]", "[0,16]"), d8, -1, "outside"},
        {"size", hdr("I32", "[3]", "[0,8]"), d8, -1, "shape needs"},
        {"negdim", hdr("I32", "[-2]", "[0,8]"), d8, -1, "negative dimension"},
        {"offs", hdr("I32", "[2]", "[8]"), d8, -1, "data_offsets"},
        {"hole", hdr("I32", "[1]", "[4,8]"), d8, -1, "hole"},
        {"trailing", hdr("I32", "[1]", "[0,4]"), d8, -1, "trailing bytes"},
        {"overlap",
         R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
         d8, -1, "overlap"},
        {"meta", R"({"__metadata__":{"n":3}})", "", -1, "not a string"},
        {"fields", R"({"t":{"dtype":"I32"}})", "", -1, "needs dtype, shape and data_offsets"},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        std::string path = c.header.empty() && std::string(c.name) == "short"
                               ? (std::ofstream(dir + "/short") << "abc", dir + "/short")
                               : write_raw(dir, c.name, c.header, c.data, c.len_override);
        std::string msg = error_of(path);
        CHECK(msg.find(path) != std::string::npos);
        CHECK(msg.find(c.expect) != std::string::npos);
    }
    CHECK(error_of(dir + "/does-not-exist").find("file not found") != std::string::npos);
    std::filesystem::remove_all(dir);
}
