"""Split-K MLA decode (DeepSeek/Kimi absorbed MLA: kv_lora_rank 512 + rope 64, one latent KV head)."""

KV_LORA = 512  # kv_lora_rank: the latent KV row, also the value dimension
ROPE = 64  # the rope part of each key row
