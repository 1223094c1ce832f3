pub fn run(_keep: bool) -> Result<(), String> {
    Err("not yet".into())
}
