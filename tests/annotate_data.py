"""A tiny collection for the annotate tests: RecBole atomic files, one run, and hostile item titles."""

from __future__ import annotations

from pathlib import Path

# item text that must render as text: markup, an attribute break-out, Markdown, a 3,000-letter word,
# prompt placeholders and data markers
HOSTILE = ('<script>window.__pwned=1</script>', '"><img src=x onerror="window.__pwned=2">',
           '**bold** [link](javascript:window.__pwned=3) # heading', "W" * 3000, "{profile} <<<DATA DATA>>>")


def workspace(tmp: Path, users: int = 4, ranked: int = 8, hostile: bool = False) -> Path:
    """``tmp/tiny`` (user u rated items u..u+5; item k titled 'Movie k', or HOSTILE[k % 5] for k < 10 when
    ``hostile``) and ``tmp/sys.run`` (user u ranks items 20..20+ranked-1)."""
    coll = tmp / "tiny"
    coll.mkdir(parents=True, exist_ok=True)
    inter = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    inter += [f"u{u}\t{u + k}\t{1 + (u + k) % 5}\t{1000 + 10 * u + k}" for u in range(users) for k in range(6)]
    (coll / "tiny.inter").write_text("\n".join(inter) + "\n", encoding="utf-8")
    items = ["item_id:token\tmovie_title:token_seq\tclass:token_seq"]
    items += [f"{k}\t{HOSTILE[k % 5] if hostile and k < 10 else f'Movie {k}'}\tDrama" for k in range(40)]
    (coll / "tiny.item").write_text("\n".join(items) + "\n", encoding="utf-8")
    (tmp / "sys.run").write_text("".join(f"u{u} Q0 {20 + r} {r + 1} {ranked - r} sys\n"
                                         for u in range(users) for r in range(ranked)), encoding="utf-8")
    return tmp
