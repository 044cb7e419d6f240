"""Reports: Markdown, HTML and figures."""
