//! Token prices and cost: a built-in table (`prices.toml`, beside this file) overridable in
//! config. A model with no price has cost `None` — never a guess.

use super::Usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output (reasoning included).
    pub output: f64,
    /// Cache reads; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Cache writes; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// The model's context window in tokens, when known (compaction starts below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

impl Price {
    /// The cost of `usage` at this price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input_tokens;
        let written = usage.cache_creation_input_tokens;
        let plain = usage.input_tokens.saturating_sub(cached + written);
        (plain as f64 * self.input
            + cached as f64 * self.cache_read.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// Prices by model name (or name prefix).
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The built-in table with `overrides` (from config) on top.
    pub fn with_overrides(overrides: &BTreeMap<String, Price>) -> Self {
        // The table is compiled in and covered by a unit test, so it always parses.
        let mut prices: BTreeMap<String, Price> = toml::from_str(include_str!("prices.toml")).unwrap_or_default();
        prices.extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        PriceTable { prices }
    }

    /// The price of `model`: an exact entry, else the longest entry that prefixes it.
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.prices.get(model).or_else(|| {
            self.prices.iter().filter(|(name, _)| model.starts_with(name.as_str())).max_by_key(|(name, _)| name.len()).map(|(_, p)| p)
        })
    }

    /// The context window of `model` in tokens, matched like its price; `None` when unknown.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.price(model).and_then(|p| p.context_window)
    }

    /// The cost of `usage` on `model`, or `None` when the model has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|p| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_prefix_matches_snapshots() {
        let table = PriceTable::with_overrides(&BTreeMap::new());
        assert!(table.price("gpt-4o").is_some());
        assert_eq!(table.price("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(table.price("gpt-4o-2024-08-06").unwrap().input, 2.5);
        assert!(table.price("my-local-model").is_none());
    }

    #[test]
    fn cost_splits_cached_and_uncached_input() {
        let price = Price { input: 2.0, output: 10.0, cache_read: Some(0.5), cache_write: None, context_window: None };
        let usage = Usage { cached_input_tokens: 400_000, ..Usage::from_counts(1_000_000, 100_000) };
        // 600k plain * 2 + 400k cached * 0.5 + 100k out * 10 = 1.2 + 0.2 + 1.0
        assert!((price.cost(&usage) - 2.4).abs() < 1e-9);
    }

    #[test]
    fn overrides_win_and_unknown_models_cost_none() {
        let overrides = BTreeMap::from([(
            "gpt-4o".to_string(),
            Price { input: 1.0, output: 1.0, cache_read: None, cache_write: None, context_window: Some(8192) },
        )]);
        let table = PriceTable::with_overrides(&overrides);
        assert_eq!(table.cost("gpt-4o", &Usage::from_counts(1_000_000, 0)), Some(1.0));
        assert_eq!(table.cost("unknown", &Usage::from_counts(1, 1)), None);
        assert_eq!(table.context_window("gpt-4o"), Some(8192));
    }

    #[test]
    fn builtin_context_windows_match_the_vendors() {
        let table = PriceTable::with_overrides(&BTreeMap::new());
        for (model, window) in
            [("gpt-4o-2024-08-06", 128_000), ("gpt-4.1", 1_047_576), ("claude-sonnet-4-20250514", 200_000), ("gemini-2.5-pro", 1_048_576)]
        {
            assert_eq!(table.context_window(model), Some(window), "{model}");
        }
        assert_eq!(table.context_window("replay"), None);
        assert_eq!(table.context_window("my-local-model"), None);
    }
}
