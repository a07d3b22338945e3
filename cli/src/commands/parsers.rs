//! The command line's own parsers (sizes, orders, placements, counts, specs) against any text
//! (tests only: they span the commands' modules).

use proptest::prelude::*;

use super::args::{parse_backend, parse_bytes, parse_gpus, parse_positive, parse_spec};
use super::gemm::parse_placement;
use super::sweep::parse_orders;

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// The command line's own parsers (sizes, orders, placements, counts) return a value or a
    /// message for any text.
    #[test]
    fn command_line_parsers_never_panic(s in prop_oneof![
        "[0-9.]{0,25}[kKmMgGiIbB ]{0,4}",
        "[0-9]{1,22}(:[0-9]{0,22}){0,3}(,[0-9]{1,22}){0,3}",
        "(host|gpu[0-9]{0,22}|GPU1|x)(,(host|gpu[0-9]{0,22}|x)){0,4}",
        "\\PC{0,12}",
    ]) {
        if let Ok(bytes) = parse_bytes(&s) {
            prop_assert!(bytes >= 1);
        }
        if let Ok(n) = parse_positive(&s) {
            prop_assert!(n >= 1);
        }
        if let Ok(orders) = parse_orders(&s) {
            prop_assert!(orders.0.iter().all(|&n| n >= 1));
        }
        let _ = parse_placement(&s);
        let _ = parse_spec(&s);
        let _ = parse_gpus(&s);
        let _ = parse_backend(&s);
    }
}

#[test]
fn sizes_below_one_byte_and_absurd_orders_are_refused() {
    assert!(
        parse_bytes("0.5")
            .unwrap_err()
            .contains("less than one byte")
    );
    assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
    assert!(parse_bytes("1e30").is_err());
    assert!(parse_bytes("99999999999999999999G").is_err());
    assert!(parse_positive("0").unwrap_err().contains("at least 1"));
    // A sweep's orders are listed: a range of 10^12 of them is refused, not built.
    assert!(parse_orders("1:1000000000000:1").is_err());
}
