use versions::parse;

#[test]
fn plain_versions_parse() {
    assert_eq!(parse("1.10.2"), Some((1, 10, 2)));
    assert_eq!(parse("1.2"), None);
}

#[test]
fn a_lowercase_v_prefix_is_accepted() {
    assert_eq!(parse("v1.2.3"), Some((1, 2, 3)));
}

#[test]
fn an_uppercase_v_prefix_is_accepted() {
    assert_eq!(parse("V1.2.3"), Some((1, 2, 3)));
}
