//! Which seeds a seeded test runs, read the same way by every simulation: `IBSM_SEED`
//! replays one, `IBSM_SEEDS` runs that many from 0 (a longer soak), else the test's
//! default count. One reader, so a replay line printed by any simulation works as is.

/// Seeds to run: `IBSM_SEED=<n>` (one seed, a replay), else `IBSM_SEEDS=<count>` seeds
/// from 0, else `0..default_count`; an error names the variable that is not a `u64`.
pub fn seeds(default_count: u64) -> Result<Vec<u64>, String> {
    seeds_from(
        std::env::var("IBSM_SEED").ok(),
        std::env::var("IBSM_SEEDS").ok(),
        default_count,
    )
}

fn seeds_from(
    one: Option<String>,
    count: Option<String>,
    default_count: u64,
) -> Result<Vec<u64>, String> {
    if let Some(s) = one {
        return s
            .trim()
            .parse::<u64>()
            .map(|v| vec![v])
            .map_err(|e| format!("IBSM_SEED={s:?} is not a u64: {e}"));
    }
    let n = match count {
        Some(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|e| format!("IBSM_SEEDS={s:?} is not a u64: {e}"))?,
        None => default_count,
    };
    Ok((0..n).collect())
}

#[cfg(test)]
mod tests {
    use super::seeds_from;

    #[test]
    fn one_seed_replays_a_count_runs_more_and_a_bad_value_is_named() {
        assert_eq!(
            seeds_from(Some(" 7 ".into()), Some("3".into()), 2),
            Ok(vec![7])
        );
        assert_eq!(seeds_from(None, Some("3".into()), 2), Ok(vec![0, 1, 2]));
        assert_eq!(seeds_from(None, None, 2), Ok(vec![0, 1]));
        let e = seeds_from(Some("x".into()), None, 2).expect_err("not a u64");
        assert!(e.starts_with("IBSM_SEED=\"x\""), "{e}");
        let e = seeds_from(None, Some("-1".into()), 2).expect_err("not a u64");
        assert!(e.starts_with("IBSM_SEEDS=\"-1\""), "{e}");
    }
}
