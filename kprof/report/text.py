"""Text cut to fit a table cell or a label without breaking a word."""

from __future__ import annotations


def cut_words(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut after a whole word and marked with "…"."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    head = text[: width - 1]
    space = head.rfind(" ")
    return (head[:space] if space > width // 3 else head).rstrip(" ,.;:-") + "…"
