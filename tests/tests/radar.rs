//! The conflict radar (issue 35) end to end: the real daemon and `maos hook` processes, a real
//! git repository with linked worktrees (`git worktree add`), one Claude Code window in each.
//! Two windows editing the same lines of one file in their own worktrees, one after the other
//! (the first's turn over, so its lock is given back and both are allowed), show up in
//! `maos radar` with the file and both sides' lines, and as `radar_conflict` events; a window
//! editing other files shows nothing; undoing the edit clears it (`radar_cleared`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_tests::window_hook as hook;
use maos_tests::window_start as start;
use maos_tests::window_write as write;
use maos_tests::{Env, Value, git, json, wait_until};

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

/// A repository with `src/api.rs` and `notes.txt` committed, and linked worktrees `names`.
fn repository(env: &Env, names: &[&str]) -> (PathBuf, Vec<PathBuf>) {
    let repo = env.root().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("src/api.rs"), TEN).unwrap();
    std::fs::write(repo.join("notes.txt"), "notes\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let worktrees = names
        .iter()
        .map(|n| {
            let w = env.root().join(n);
            git(
                &repo,
                &["worktree", "add", "-q", "-b", n, w.to_str().unwrap()],
            );
            w
        })
        .collect();
    (repo, worktrees)
}

fn radar(env: &Env, repo: &Path) -> Vec<Value> {
    let v = env.maos_json_in(repo, &["radar"]);
    v.as_array().cloned().unwrap_or_default()
}

/// The radar's pairs once there are some (the test fails after 10 s, saying `what`).
fn pairs_within(env: &Env, repo: &Path, what: &str) -> Vec<Value> {
    let mut pairs = Vec::new();
    wait_until(Duration::from_secs(10), what, || {
        pairs = radar(env, repo);
        !pairs.is_empty()
    });
    pairs
}

fn events(env: &Env, repo: &Path, kind: &str) -> Vec<Value> {
    env.events_in(repo, &["--type", kind])
}

/// Windows wa, wb, wc in worktrees `w[0..3]`: A edits line 5 of `src/api.rs` and its turn
/// ends (its lock is given back); C edits another file only; then B edits line 5 too.
fn clash(env: &Env, w: &[PathBuf]) {
    // A edits line 5, its turn ends (its lock is given back).
    write(
        env,
        &w[0],
        "wa",
        "src/api.rs",
        &TEN.replace("5\n", "five from a\n"),
    );
    hook(env, &w[0], "wa", "Stop", json!({}));
    // C edits another file only; then B edits line 5 too.
    write(env, &w[2], "wc", "notes.txt", "c's notes\n");
    write(
        env,
        &w[1],
        "wb",
        "src/api.rs",
        &TEN.replace("5\n", "five from b\n"),
    );
    hook(env, &w[1], "wb", "Stop", json!({}));
}

#[test]
fn overlapping_edits_in_two_worktrees_show_and_clear() {
    let env = Env::new();
    let (repo, w) = repository(&env, &["agent-a", "agent-b", "agent-c"]);
    for (dir, window) in w.iter().zip(["wa", "wb", "wc"]) {
        start(&env, dir, window);
    }
    clash(&env, &w);

    let pairs = pairs_within(&env, &repo, "the radar shows a and b's conflict");
    assert_eq!(pairs.len(), 1, "{pairs:#?}");
    let pair = &pairs[0];
    let sides = [
        pair["a"]["worktree"].as_str().unwrap(),
        pair["b"]["worktree"].as_str().unwrap(),
    ];
    let (wa, wb) = (w[0].to_str().unwrap(), w[1].to_str().unwrap());
    assert_eq!(sides, [wa, wb], "the pair is a and b, never c");
    assert_eq!(
        [&pair["a"]["branch"], &pair["b"]["branch"]],
        ["agent-a", "agent-b"],
        "each side's branch"
    );
    assert_eq!(pair["files"].as_array().unwrap().len(), 1);
    let file = &pair["files"][0];
    assert_eq!(file["path"], "src/api.rs");
    assert_eq!(file["kind"], "contents");
    assert_eq!(file["hunks"][0]["a"], "five from a\n");
    assert_eq!(file["hunks"][0]["b"], "five from b\n");
    assert_eq!(file["hunks"][0]["base"], "5\n");
    assert!(
        file["diff_b"].as_str().unwrap().contains("+five from b"),
        "{file}"
    );
    for side in ["a", "b"] {
        assert_eq!(
            pair[side]["agents"].as_array().map(Vec::len),
            Some(1),
            "{pair}"
        );
    }
    // `maos ps` says it on both agents' rows.
    let ps = String::from_utf8_lossy(&env.maos_in(&repo, &["ps"]).stdout).into_owned();
    assert_eq!(
        ps.matches("~ src/api.rs would conflict with").count(),
        2,
        "{ps}"
    );
    // The human table names the file and the line.
    let table = env.maos_in(&repo, &["radar"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("src/api.rs  contents, at line 5"), "{text}");
    assert!(text.contains(&format!("{wa} [agent-a] (agt_")), "{text}");
    // Each side's session recorded the conflict.
    let mut told = Vec::new();
    let waited = maos_tests::holds_within(Duration::from_secs(10), || {
        told = events(&env, &repo, "radar_conflict");
        told.len() == 2
    });
    assert!(
        waited,
        "radar_conflict events: {told:#?}\n{:#?}",
        env.events_in(&repo, &[])
    );
    let told = events(&env, &repo, "radar_conflict");
    assert_eq!(told[0]["data"]["files"], json!(["src/api.rs"]));
    private_radar_files(&env);

    // A's next write to the file is let through and told B's change and whose it is.
    let b_agent = pair["b"]["agents"][0].as_str().unwrap().to_string();
    let input = json!({"tool_name": "Edit", "tool_use_id": "toolu_wa_again",
                       "tool_input": {"file_path": w[0].join("src/api.rs"),
                                      "old_string": "1", "new_string": "one"}});
    let out = hook(&env, &w[0], "wa", "PreToolUse", input.clone());
    assert_eq!(
        maos_tests::denial_reason(&out),
        "",
        "a conflict is not a lock"
    );
    std::fs::write(
        w[0].join("src/api.rs"),
        TEN.replace("5\n", "five from a\n")
            .replacen("1\n", "one\n", 1),
    )
    .unwrap();
    let out = hook(&env, &w[0], "wa", "PostToolUse", input);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let told = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(
        told.contains("maos radar") && told.contains("+five from b") && told.contains(&b_agent),
        "{v}"
    );
    hook(&env, &w[0], "wa", "Stop", json!({}));
    // C, whose work conflicts with nobody's, is told nothing of it.
    let input = json!({"tool_name": "Write", "tool_use_id": "toolu_wc_again",
                       "tool_input": {"file_path": w[2].join("src/api.rs"), "content": "c"}});
    let out = hook(&env, &w[2], "wc", "PreToolUse", input.clone());
    assert_eq!(maos_tests::denial_reason(&out), "", "c may write");
    let out = hook(&env, &w[2], "wc", "PostToolUse", input);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("maos radar"));
    hook(&env, &w[2], "wc", "Stop", json!({}));

    // B gives its edit up: cleared, and recorded.
    write(&env, &w[1], "wb", "src/api.rs", TEN);
    wait_until(Duration::from_secs(10), "the conflict clears", || {
        radar(&env, &repo).is_empty() && events(&env, &repo, "radar_cleared").len() == 2
    });
    let text = String::from_utf8_lossy(&env.maos_in(&repo, &["radar"]).stdout).into_owned();
    assert_eq!(text.trim(), "no conflicts predicted");
}

/// The radar's own index files (one per worktree, a listing of its files) are the user's alone,
/// as everything else under `MAOS_HOME` (tests/tests/security.rs walks what exists without them).
fn private_radar_files(env: &Env) {
    use std::os::unix::fs::PermissionsExt;
    let mut seen = 0;
    for project in std::fs::read_dir(env.home.join("projects")).unwrap() {
        let dir = project.unwrap().path().join("radar");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
        for entry in entries {
            let path = entry.unwrap().path();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", path.display());
            seen += 1;
        }
    }
    assert!(
        seen >= 2,
        "the radar kept an index file per worktree ({seen})"
    );
}

#[test]
fn the_same_file_on_other_lines_is_no_conflict() {
    let env = Env::new();
    let (repo, w) = repository(&env, &["agent-a", "agent-b"]);
    start(&env, &w[0], "wa");
    start(&env, &w[1], "wb");
    write(
        &env,
        &w[0],
        "wa",
        "src/api.rs",
        &TEN.replace("1\n", "one\n"),
    );
    hook(&env, &w[0], "wa", "Stop", json!({}));
    write(
        &env,
        &w[1],
        "wb",
        "src/api.rs",
        &TEN.replace("10\n", "ten\n"),
    );
    // Then a clash elsewhere, so there is something to wait for: only it shows.
    write(&env, &w[0], "wa", "notes.txt", "a\n");
    hook(&env, &w[0], "wa", "Stop", json!({}));
    write(&env, &w[1], "wb", "notes.txt", "b\n");
    let pairs = pairs_within(&env, &repo, "the radar shows the notes' conflict");
    let files: Vec<&str> = pairs[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        ["notes.txt"],
        "src/api.rs merges cleanly: {pairs:#?}"
    );
    assert_eq!(pairs[0]["overlap"], json!(["notes.txt", "src/api.rs"]));
}

/// `maos top` (a real terminal, 80×24) says it too: a line under each agent at risk, the
/// file and the other side's agent, as `maos ps` words it; gone when the edit is undone.
#[test]
fn top_shows_a_line_under_each_agent_at_risk() {
    use maos_tests::tmux::Tmux;
    if !Tmux::available() {
        return;
    }
    let env = Env::new();
    let (repo, w) = repository(&env, &["agent-a", "agent-b"]);
    start(&env, &w[0], "wa");
    start(&env, &w[1], "wb");
    let repo_arg = repo.to_string_lossy().into_owned();
    let top = Tmux::start(&env, 80, 24, &["maos", "top", "--project", &repo_arg], &[]);
    let five = |who: &str| TEN.replace("5\n", &format!("five from {who}\n"));
    write(&env, &w[0], "wa", "src/api.rs", &five("a"));
    hook(&env, &w[0], "wa", "Stop", json!({}));
    write(&env, &w[1], "wb", "src/api.rs", &five("b"));
    hook(&env, &w[1], "wb", "Stop", json!({}));
    let pairs = pairs_within(&env, &repo, "the radar sees the conflict");
    let agent = |side: &str| {
        let id = pairs[0][side]["agents"][0].as_str().unwrap();
        maos_core::ids::short(id).to_string()
    };
    let (a, b) = (agent("a"), agent("b"));
    let says = |other: &str| format!("~ src/api.rs would conflict with {other}");
    let screen = top.wait_for_within(Duration::from_secs(10), "both agents' radar lines", |s| {
        s.contains(&says(&a)) && s.contains(&says(&b))
    });
    // Each line is right under its agent's row, and names the other agent.
    let lines: Vec<&str> = screen.lines().collect();
    for (me, other) in [(&a, &b), (&b, &a)] {
        let at = lines
            .iter()
            .position(|l| l.contains(&format!("└ {me}")))
            .unwrap_or_else(|| panic!("no row for {me}:\n{screen}"));
        assert!(
            lines.get(at + 1).is_some_and(|l| l.contains(&says(other))),
            "{me}'s radar line under its row:\n{screen}"
        );
    }
    assert!(
        screen.lines().all(|l| l.chars().count() <= 80),
        "nothing wider than the terminal:\n{screen}"
    );
    // B gives its edit up: the lines go.
    write(&env, &w[1], "wb", "src/api.rs", TEN);
    top.wait_for_within(Duration::from_secs(10), "the radar lines gone", |s| {
        !s.contains("would conflict") && s.contains(&format!("└ {a}"))
    });
}

/// A file name and contents that are markup: the dashboard must show them as text.
const HOSTILE: &str = "<img src=x onerror=window.pwned=1>.html";

/// The dashboard (a real headless Chromium through chromedriver, the real `maos-dash`): with
/// the page open, two windows' overlapping uncommitted edits in their worktrees appear live as
/// one pair (worktrees, branches, commits, agents linked to their sessions, when merged), its
/// files, each file's conflicting hunk (both sides' lines and the base's) and each side's diff;
/// a third window's edit of other lines of the same file shows nowhere; a file name and
/// contents that are HTML are shown as text and run nothing; the agent's session page says it
/// is at risk; when the edits are undone the page says plainly that nothing is predicted.
#[test]
fn the_dashboard_shows_the_pair_the_files_the_hunks_and_each_sides_diff() {
    use maos_tests::dashboard::Dashboard;
    use maos_tests::webdriver::Browser;
    if !maos_tests::webdriver::available() {
        return;
    }
    let env = Env::new();
    let (repo, w) = repository(&env, &["agent-a", "agent-b", "agent-c"]);
    for (dir, window) in w.iter().zip(["wa", "wb", "wc"]) {
        start(&env, dir, window);
    }
    let root = repo.to_str().unwrap();
    let d = Dashboard::start(&env);
    let browser = Browser::start(&env.root().join("chromium"));
    browser.resize(1300, 1700);
    browser.open(&d.url);
    let radar = format!("document.querySelector('div.radar-box[data-radar=\"{root}\"]')");
    browser.until_js(
        "the project's radar, empty",
        &format!("const r = {radar}; return r && r.textContent.includes('No predicted conflict')"),
    );

    // C edits line 9 of the file, A line 5 (and adds a file whose name is markup), B the same
    // line 5 (and the same new file, other markup): only A and B conflict, on both files (git
    // calls the new file's an add/add conflict, of kind `contents`).
    let line = |n: &str, who: &str| TEN.replace(&format!("{n}\n"), &format!("{n} from {who}\n"));
    write(&env, &w[2], "wc", "src/api.rs", &line("9", "c"));
    hook(&env, &w[2], "wc", "Stop", json!({}));
    let a_markup = "<script>window.pwned = 2</script>\n<b>a's</b>\n";
    write(&env, &w[0], "wa", "src/api.rs", &line("5", "a"));
    write(&env, &w[0], "wa", HOSTILE, a_markup);
    hook(&env, &w[0], "wa", "Stop", json!({}));
    write(&env, &w[1], "wb", HOSTILE, "<i onclick=alert(1)>b's</i>\n");
    write(&env, &w[1], "wb", "src/api.rs", &line("5", "b"));
    let written = std::time::Instant::now();
    hook(&env, &w[1], "wb", "Stop", json!({}));
    let shown = format!(
        "const r = {radar}; return r && r.querySelectorAll('article.pair .rfile').length === 2 \
         && [...r.querySelectorAll('.rfile pre.b')].some(p => p.textContent === '5 from b\\n')"
    );
    browser.until_js("the pair, both files, B's lines", &shown);
    eprintln!(
        "the dashboard showed the conflict {} ms after B's write (PostToolUse) returned",
        written.elapsed().as_millis()
    );
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-radar.png");
    browser.eval(&format!("{radar}.scrollIntoView()"));
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG: {}", shot.display());

    let seen = browser.eval(&format!(
        "const r = {radar}, p = r.querySelector('article.pair');
         const file = path => [...p.querySelectorAll('.rfile')].find(f => f.dataset.path === path);
         const text = (f, sel) => [...f.querySelectorAll(sel)].map(e => e.textContent);
         const api = file('src/api.rs'), bad = file({HOSTILE:?});
         return {{pairs: r.querySelectorAll('article.pair').length, a: p.dataset.a, b: p.dataset.b,
                 branches: text(p, '.side .branch'), agents: [...p.querySelectorAll('.side a[data-agent]')].map(a => a.getAttribute('href')),
                 meta: p.querySelector(':scope > p.meta').textContent, whole: r.textContent,
                 files: text(p, '.rfile .path'), kinds: text(p, '.rfile .badge'),
                 api_hunk: [text(api, '.hunk pre.a'), text(api, '.hunk pre.base'), text(api, '.hunk pre.b')],
                 api_diffs: [text(api, 'details[data-side=\"a\"] pre.diff'), text(api, 'details[data-side=\"b\"] pre.diff')],
                 bad_hunk: bad ? [text(bad, '.hunk pre.a'), text(bad, '.hunk pre.b')] : null,
                 bad_diffs: bad ? text(bad, 'pre.diff') : null,
                 markup: r.querySelectorAll('img, script, b, i, [onclick], [onerror]').length,
                 scripts: document.scripts.length, pwned: window.pwned === undefined ? null : window.pwned}};"
    ));
    let (wa, wb, wc) = (
        w[0].to_str().unwrap(),
        w[1].to_str().unwrap(),
        w[2].to_str().unwrap(),
    );
    assert_eq!(seen["pairs"], 1, "{seen:#}");
    assert_eq!([&seen["a"], &seen["b"]], [wa, wb], "{seen:#}");
    assert!(
        !seen["whole"].as_str().unwrap().contains(wc),
        "C's edit of other lines is in no pair: {seen:#}"
    );
    assert_eq!(seen["branches"], json!(["agent-a", "agent-b"]));
    let agents = seen["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "each side's agent, linked: {seen:#}");
    assert!(
        agents
            .iter()
            .all(|h| h.as_str().unwrap().starts_with("#/session/"))
    );
    let meta = seen["meta"].as_str().unwrap();
    assert!(
        meta.starts_with("merge base ") && meta.contains(" UTC") && meta.contains("src/api.rs"),
        "{meta}"
    );
    assert_eq!(seen["files"], json!([HOSTILE, "src/api.rs"]), "{seen:#}");
    assert_eq!(seen["kinds"], json!(["contents", "contents"]), "{seen:#}");
    assert_eq!(
        seen["api_hunk"],
        json!([["5 from a\n"], ["5\n"], ["5 from b\n"]]),
        "{seen:#}"
    );
    for (side, who) in [(0, "a"), (1, "b")] {
        let diff = seen["api_diffs"][side][0].as_str().unwrap();
        assert!(
            diff.contains("-5\n") && diff.contains(&format!("+5 from {who}")),
            "{who}'s diff: {diff}"
        );
    }
    // Markup from outside is text: shown as written, and nothing of it is an element or runs.
    let bad = &seen["bad_hunk"];
    assert_eq!(
        bad[0][0].as_str().unwrap(),
        a_markup,
        "A's lines as text: {seen:#}"
    );
    assert!(bad[1][0].as_str().unwrap().contains("<i onclick=alert(1)>"));
    assert!(
        seen["bad_diffs"][0]
            .as_str()
            .unwrap()
            .contains("+<script>window.pwned = 2</script>"),
        "{seen:#}"
    );
    assert_eq!(seen["markup"], 0, "no element made of outside text");
    assert_eq!(seen["scripts"], 1, "the page's own script only");
    assert_eq!(seen["pwned"], Value::Null, "nothing ran");

    // A's session page says its agent is at risk (the link from the radar leads there).
    let a_agent = browser.eval(&format!(
        "const a = {radar}.querySelector('.side a[data-agent]'); a.click(); return a.dataset.agent"
    ));
    let a_agent = a_agent.as_str().unwrap();
    browser.until_js(
        "A's session page with the radar line",
        &format!(
            "return [...document.querySelectorAll('li[data-agent=\"{a_agent}\"] .radar-risk')].some(l => \
             l.textContent.includes('src/api.rs would conflict with') && l.textContent.includes({wb:?}))"
        ),
    );

    // Back to the projects; B undoes both edits (its file the same as A's): live, nothing left.
    browser.eval("location.hash = '#/'");
    browser.until_js("the pair again", &shown);
    write(&env, &w[1], "wb", HOSTILE, a_markup);
    write(&env, &w[1], "wb", "src/api.rs", TEN);
    browser.until_js(
        "the radar empty again",
        &format!(
            "const r = {radar}; return r && !r.querySelector('article.pair') \
             && r.textContent.includes('No predicted conflict')"
        ),
    );
    assert_eq!(
        browser.eval("return window.pwned === undefined"),
        Value::Bool(true)
    );
}

/// `maos radar --lock`: a predicted conflict becomes a Read lock on the file for the later
/// writer, through the ordinary lock request; the other side's writes of the file are then
/// refused naming it, its own are not; asking again changes nothing; nothing predicted (or
/// nothing for the agent named) is an error.
#[test]
fn radar_lock_gives_the_later_writer_a_read_lock() {
    let env = Env::new();
    let (repo, w) = repository(&env, &["agent-a", "agent-b", "agent-c"]);
    for (dir, window) in w.iter().zip(["wa", "wb", "wc"]) {
        start(&env, dir, window);
    }
    let f = env.maos_fail_in(&repo, &["radar", "--lock"]);
    assert!(
        f.message
            .contains("nothing to lock: the radar predicts no conflict"),
        "{}",
        f.message
    );
    clash(&env, &w);
    let pairs = pairs_within(&env, &repo, "the radar shows a and b's conflict");
    let b_agent = pairs[0]["b"]["agents"][0].as_str().unwrap().to_string();
    let a_agent = pairs[0]["a"]["agents"][0].as_str().unwrap().to_string();

    let locked = env.maos_json_in(&repo, &["radar", "--lock"]);
    let locked = locked.as_array().cloned().unwrap_or_default();
    assert_eq!(locked.len(), 1, "{locked:?}");
    assert_eq!(locked[0]["path"], "src/api.rs");
    assert_eq!(locked[0]["agent"], b_agent.as_str(), "b wrote last");
    assert_eq!(locked[0]["other_agents"], json!([a_agent]));
    assert_eq!(locked[0]["outcome"], "locked");
    let token = locked[0]["token"].as_u64().expect("a fencing token");
    let list = env.maos_json_in(&repo, &["lock", "list"]);
    let held: Vec<&Value> = list["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["path"] == "src/api.rs")
        .collect();
    assert_eq!(held.len(), 1, "{list}");
    assert_eq!(held[0]["holder"], b_agent.as_str());
    assert_eq!(held[0]["mode"], "read");

    // Again: nothing new, the same lock; the table says so.
    let again = env.maos_json_in(&repo, &["radar", "--lock"]);
    assert_eq!(again[0]["outcome"], "already held", "{again}");
    assert_eq!(again[0]["token"].as_u64(), Some(token));
    let table = env.maos_in(&repo, &["radar", "--lock"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("already held: src/api.rs (read) for")
            && text.contains(&format!("token {token}")),
        "{text}"
    );

    // A's next write of the file is refused, naming B; B may still write it (its write lock
    // replaces the read lock, and is given back at the end of its turn like any other).
    let input = json!({"tool_name": "Write", "tool_use_id": "toolu_wa_locked",
                       "tool_input": {"file_path": w[0].join("src/api.rs"), "content": "x"}});
    let out = hook(&env, &w[0], "wa", "PreToolUse", input);
    let reason = maos_tests::denial_reason(&out);
    assert!(
        reason.contains(maos_core::ids::short(&b_agent)),
        "a is refused naming b: {reason:?}"
    );
    write(
        &env,
        &w[1],
        "wb",
        "src/api.rs",
        &TEN.replace("5\n", "FIVE from b\n"),
    );
    hook(&env, &w[1], "wb", "Stop", json!({}));
    let list = env.maos_json_in(&repo, &["lock", "list"]);
    assert!(
        !list["locks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["path"] == "src/api.rs"),
        "{list}"
    );

    // C is in no conflicting pair.
    let c_agent = env.maos_json_in(&repo, &["ps"])[0]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .find(|id| *id != a_agent && *id != b_agent)
        .expect("c's agent");
    let f = env.maos_fail_in(&repo, &["radar", "--lock", "--agent", &c_agent]);
    assert!(
        f.message.contains("nothing to lock") && f.message.contains(&c_agent),
        "{}",
        f.message
    );
}

/// `maos radar --lock` over a pair that conflicts on two files, each written last by another
/// side: every file's own writes decide its holder (the writes of all the files come in one
/// request; a file's events must not count for another).
#[test]
fn radar_lock_decides_each_file_by_its_own_writes() {
    let env = Env::new();
    let (repo, w) = repository(&env, &["agent-a", "agent-b"]);
    for (dir, window) in w.iter().zip(["wa", "wb"]) {
        start(&env, dir, window);
    }
    let turn = |i: usize, window: &str, path: &str, content: &str| {
        write(&env, &w[i], window, path, content);
        hook(&env, &w[i], window, "Stop", json!({}));
    };
    // A writes the code, then B; B writes the notes, then A.
    turn(0, "wa", "src/api.rs", &TEN.replace("5\n", "five from a\n"));
    turn(1, "wb", "notes.txt", "b's notes\n");
    turn(1, "wb", "src/api.rs", &TEN.replace("5\n", "five from b\n"));
    turn(0, "wa", "notes.txt", "a's notes\n");
    let mut pairs = Vec::new();
    wait_until(Duration::from_secs(10), "both files in the pair", || {
        pairs = radar(&env, &repo);
        pairs
            .first()
            .and_then(|p| p["files"].as_array())
            .map(Vec::len)
            == Some(2)
    });
    let agent_in = |dir: &Path| {
        let side = ["a", "b"]
            .iter()
            .map(|s| &pairs[0][s])
            .find(|side| Path::new(side["worktree"].as_str().unwrap()) == dir)
            .unwrap_or_else(|| panic!("a side in {}: {:#}", dir.display(), pairs[0]));
        side["agents"][0].as_str().unwrap().to_string()
    };
    let (a_agent, b_agent) = (agent_in(&w[0]), agent_in(&w[1]));

    let locked = env.maos_json_in(&repo, &["radar", "--lock"]);
    let holders: Vec<(&str, &str, &str)> = locked
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["path"].as_str().unwrap(),
                o["agent"].as_str().unwrap(),
                o["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let mut want = vec![
        ("notes.txt", a_agent.as_str(), "locked"),
        ("src/api.rs", b_agent.as_str(), "locked"),
    ];
    let mut got = holders.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{locked:#}");
    let list = env.maos_json_in(&repo, &["lock", "list"]);
    for (path, holder, _) in want {
        assert!(
            list["locks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["path"] == path && l["holder"] == holder && l["mode"] == "read"),
            "{path} read-locked by {holder}: {list:#}"
        );
    }
}
