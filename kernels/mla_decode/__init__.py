"""Split-K MLA decode (DeepSeek/Kimi absorbed MLA: kv_lora_rank 512 + rope 64, one latent KV head)."""
