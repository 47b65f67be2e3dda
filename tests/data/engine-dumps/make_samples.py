#!/usr/bin/env python3
"""Regenerate the hand-made sample files (stdlib only). Expected decoded routing
for every per-request sample: R[t][l][k] below, T=3 rows (T_total=4), L=2, K=2, E=8."""
import base64, json, struct

R = [[[3, 7], [0, 5]], [[3, 1], [2, 5]], [[6, 7], [0, 4]]]
FLAT = [x for t in R for l in t for x in l]

def npy(descr, fmt, shape, vals):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)))
    pad = (64 - (10 + len(hdr) + 1) % 64) % 64
    hdr = hdr + " " * pad + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1")
            + struct.pack("<%d%s" % (len(vals), fmt), *vals))

u8 = npy("|u1", "B", (3, 2, 2), FLAT)
open("vllm_r3_routing_u8.npy", "wb").write(u8)
json.dump({"id": "cmpl-x", "object": "text_completion", "model": "m",
           "choices": [{"index": 0, "text": "..", "finish_reason": "length",
                        "prompt_token_ids": [11, 12], "token_ids": [13, 14],
                        "routed_experts": base64.b64encode(u8).decode()}]},
          open("vllm_r3_completion_response.json", "w"), indent=1)
json.dump({"prompt_routed_experts": R[:2],
           "choices": [{"index": 0, "routed_experts": R[2:]}]},
          open("vllm_v021_completion_response.json", "w"), indent=1)
json.dump({"text": "..", "meta_info": {
            "routed_experts": base64.b64encode(struct.pack("<%di" % len(FLAT), *FLAT)).decode()}},
          open("sglang_generate_int32.json", "w"), indent=1)
json.dump({"text": "..", "meta_info": {"routed_experts_dtype": "uint8",
            "routed_experts": base64.b64encode(bytes(FLAT)).decode()}},
          open("sglang_generate_uint8.json", "w"), indent=1)
with open("megatron_router_trace_rank0.jsonl", "w") as f:
    # one decode step, 3 tokens in the batch, layers numbered 1..2 (sink-path numbering)
    for l in range(2):
        f.write(json.dumps({"step": 0, "stage": "pre_dispatch", "block": "decoder", "layer": l + 1,
                            "rank": 0, "num_tokens": 3, "topk": 2,
                            "top_indices": [R[t][l] for t in range(3)]}) + "\n")
json.dump({"choices": [{"index": 0, "moe_topk_indices": R, "prompt_moe_topk_indices": R[:2]}]},
          open("megatron_chat_completion.json", "w"), indent=1)
# SGLang --init-expert-location JSON / stat-equivalent: logical_count [L=2][E=8] (column sums of R)
cnt = [[sum(1 for t in R for x in t[l] if x == e) for e in range(8)] for l in range(2)]
json.dump({"logical_count": cnt}, open("sglang_init_expert_location.json", "w"))
with open("sglang_legacy_expert_distribution.csv", "w") as f:
    f.write("layer_id,expert_id,count\n")
    for l in range(2):
        for e in range(8):
            if cnt[l][e]:
                f.write("%d,%d,%d\n" % (l, e, cnt[l][e]))
print("logical_count", cnt)
