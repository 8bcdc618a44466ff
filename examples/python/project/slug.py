"""URL slugs from titles: "Hello, World!" becomes "hello-world"."""

import re


def slugify(title: str) -> str:
    """The slug of `title`: lowercase letters and digits, words joined by single hyphens."""
    return re.sub(r"\s+", "-", title.strip().lower())
