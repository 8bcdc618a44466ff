from slug import slugify


def test_accents_become_plain_letters():
    assert slugify("Crème Brûlée") == "creme-brulee"
    assert slugify("Ça va") == "ca-va"
