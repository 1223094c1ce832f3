//! What one run of `maos-bench` was asked for: the scenario and its options (`main` reads
//! them from the command line; each scenario reads the ones it takes).

#[derive(Clone, Debug, Default)]
pub struct Opts {
    pub scenario: String,
    pub clients: Option<usize>,
    pub requests: Option<usize>,
    pub duration: Option<f64>,
    pub synchronous: Option<String>,
    pub per_session: Option<usize>,
    pub paths: Option<usize>,
    pub wait_ms: Option<u64>,
    pub agents: Option<usize>,
    pub pace_ms: Option<u64>,
    pub events: Option<usize>,
    pub rate: Option<f64>,
    pub markdown: bool,
    /// radar-corpus: the repositories (`--repo`, repeatable) and where to write the corpus.
    pub repos: Vec<String>,
    pub out: Option<String>,
}
