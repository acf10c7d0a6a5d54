"""Paged split-K GQA decode attention (Llama-style 32/8 heads)."""
