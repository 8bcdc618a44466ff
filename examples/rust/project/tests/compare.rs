use std::cmp::Ordering;
use versions::{compare, newest};

#[test]
fn equal_versions_are_equal() {
    assert_eq!(compare("1.2.3", "1.2.3"), Ordering::Equal);
}

#[test]
fn minor_ten_comes_after_minor_nine() {
    assert_eq!(compare("1.10.0", "1.9.0"), Ordering::Greater);
    assert_eq!(compare("1.9.0", "1.10.0"), Ordering::Less);
}

#[test]
fn newest_compares_numbers_not_text() {
    assert_eq!(newest(&["0.9.12", "0.10.1", "0.10.0"]), Some("0.10.1"));
    assert_eq!(newest(&[]), None);
}
