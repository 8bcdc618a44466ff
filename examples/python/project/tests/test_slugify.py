from slug import slugify


def test_words_are_joined_by_hyphens():
    assert slugify("Release notes") == "release-notes"
    assert slugify("  many   spaces  ") == "many-spaces"


def test_punctuation_is_dropped():
    assert slugify("Hello, World!") == "hello-world"
    assert slugify("What's new in 2.0?") == "what-s-new-in-2-0"
    assert slugify("a -- b") == "a-b"
