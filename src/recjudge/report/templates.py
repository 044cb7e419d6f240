"""The reports' Jinja2 templates (package data in ``report/templates/``) and the Markdown filters they use.

Markdown templates render with ``trim_blocks`` and ``lstrip_blocks``: a line holding only a block tag
(``{% if %}``, ``{% for %}``) leaves nothing behind, so the template's lines are the report's lines.
Data reaches the Markdown only through the filters (``md_text``, ``md_code``, ``table``), which escape
it; an HTML template would be autoescaped."""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["render"]


@functools.lru_cache(maxsize=1)
def _environment():
    import jinja2

    from .evaluation import markdown_table, md_code, md_text

    env = jinja2.Environment(loader=jinja2.PackageLoader("recjudge.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "htm"], default_for_string=False),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(md_text=md_text, md_code=md_code, fmt=format,
                       table=lambda frame, index=False: markdown_table(frame, index=index))
    return env


def render(template: str, /, **context: Any) -> str:
    """Template ``template`` of ``report/templates/`` rendered with ``context``."""
    return _environment().get_template(template).render(**context)
