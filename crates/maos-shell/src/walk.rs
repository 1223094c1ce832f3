//! The bounded parse and the walk over the syntax tree: separators, pipelines, subshells,
//! compound commands, redirections, `cd`, and the simple commands handed to `cmds`.

use brush_parser::ast::{
    AndOr, AndOrList, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList,
    IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, Pipeline, SeparatorOperator,
    SimpleCommand,
};
use brush_parser::{ParserOptions, SourceInfo, Token};
use maos_core::text::collapse_whitespace;

use crate::word::{Expanded, Vars, braces, expand, substitutions};
use crate::{Analysis, Dir, How, MAX_DEPTH, MAX_LEN, MAX_NESTING, MAX_SUBSTITUTIONS, Write};

/// The shell state a command runs in: its directory and the variables it set.
#[derive(Clone, Debug)]
pub(crate) struct Scope {
    pub dir: Dir,
    pub vars: Vars,
}

/// The walk's output and how deep in nested shells it is.
pub(crate) struct Walker<'a> {
    pub out: &'a mut Analysis,
    /// Shells inside shells being walked (at most [`MAX_DEPTH`]).
    pub depth: u8,
    /// Nested constructs open in the scripts being walked: the walk's recursion is bounded by
    /// [`MAX_NESTING`] across nested shells too.
    pub nesting: usize,
    /// Inside a `for` loop being walked once per value: loops inside it (in nested shells too)
    /// are walked once, so the work stays within 16 times the command's size.
    pub unrolling: bool,
    /// The text of the script being walked (positions in the tree index its characters).
    pub src: String,
}

/// Parses and walks the top-level command.
pub(crate) fn analyze_into(command: &str, out: &mut Analysis) {
    let mut scope = Scope {
        dir: Dir::Start,
        vars: Vars::default(),
    };
    let mut w = Walker {
        out,
        depth: 0,
        nesting: 0,
        unrolling: false,
        src: String::new(),
    };
    if let Err(e) = w.script(command, &mut scope) {
        w.out.error.get_or_insert(e);
    }
}

/// Parses `text` under the size and nesting bounds, `nesting` constructs being open around it
/// already; returns the program and the constructs it opens.
fn parse(text: &str, nesting: usize) -> Result<(brush_parser::ast::Program, usize), String> {
    if text.len() > MAX_LEN {
        return Err(format!(
            "command too long to analyse ({} bytes, the limit is {MAX_LEN})",
            text.len()
        ));
    }
    let raw = substitution_count(text);
    if raw > MAX_SUBSTITUTIONS {
        return Err(format!(
            "command has too many substitutions to analyse ({raw}, the limit is {MAX_SUBSTITUTIONS})"
        ));
    }
    if raw <= MAX_NESTING {
        return parse_bounded(text, nesting);
    }
    // Many `$(`, `${`: most likely the text of a here-document (a script, a template), which
    // the tokenizer reads as plain text; but only tokenizing tells it from code, and the
    // tokenizer recurses once per nested substitution. So it runs on a thread whose stack
    // holds that many levels (reserved, not touched: a few pages unless they really nest).
    let owned = text.to_owned();
    let stack = 256 * 1024 + raw * STACK_PER_LEVEL;
    std::thread::Builder::new()
        .name("maos-shell parse".to_owned())
        .stack_size(stack)
        .spawn(move || parse_bounded(&owned, nesting))
        .map_err(|e| collapse_whitespace(&format!("cannot analyse the command: {e}")))?
        .join()
        .map_err(|_| "cannot parse the command: the parser failed".to_owned())?
}

/// Stack reserved per nested substitution when tokenizing on a thread of its own (a debug
/// build's tokenizer uses about 10 KiB per level).
const STACK_PER_LEVEL: usize = 32 * 1024;

/// `$(`, `${`, `<(`, `>(` and backquotes in `text`: a bound on the tokenizer's recursion.
pub(crate) fn substitution_count(text: &str) -> usize {
    let b = text.as_bytes();
    let mut n = 0;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'`' => n += 1,
            b'$' | b'<' | b'>' => {
                let next = b.get(i + 1).copied();
                n += usize::from(next == Some(b'(') || (c == b'$' && next == Some(b'{')));
            }
            _ => {}
        }
    }
    n
}

/// Tokenizes and parses `text`, refusing more than [`MAX_NESTING`] nested constructs in all.
fn parse_bounded(
    text: &str,
    nesting: usize,
) -> Result<(brush_parser::ast::Program, usize), String> {
    let options = ParserOptions::default();
    let tokens = brush_parser::uncached_tokenize_str(text, &options.tokenizer_options())
        .map_err(|e| collapse_whitespace(&format!("cannot parse the command: {e}")))?;
    // What the parser (and this crate's walk) recurse on: compound commands, and process
    // substitutions, which the parser reads out of word tokens. (Here-document bodies and
    // quoted strings are single tokens: they do not count.)
    let openers: usize = tokens
        .iter()
        .map(|t| match t {
            Token::Operator(o, _) => usize::from(o == "(" || o == "(("),
            Token::Word(w, _) => match w.as_str() {
                "{" | "if" | "for" | "while" | "until" | "case" | "select" | "[[" | "function" => 1,
                w if w.contains('(') => w
                    .as_bytes()
                    .windows(2)
                    .filter(|p| p[1] == b'(' && (p[0] == b'<' || p[0] == b'>'))
                    .count(),
                _ => 0,
            },
        })
        .sum();
    if nesting + openers > MAX_NESTING {
        return Err(format!(
            "command has too many nested constructs to analyse ({}, the limit is {MAX_NESTING})",
            nesting + openers
        ));
    }
    brush_parser::parse_tokens(&tokens, &options, &SourceInfo::default())
        .map(|p| (p, openers))
        .map_err(|e| collapse_whitespace(&format!("cannot parse the command: {e}")))
}

/// `/dev/null`, `/dev/stderr`, `/dev/fd/2`, `/proc/self/fd/1`: not files anyone holds.
pub(crate) fn is_device(path: &str) -> bool {
    path.starts_with("/dev/") || path.starts_with("/proc/self/fd/") || path == "-"
}

impl Walker<'_> {
    /// Parses `text` and walks it in `scope` (a nested shell: one level deeper).
    pub fn script(&mut self, text: &str, scope: &mut Scope) -> Result<(), String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!(
                "command nests shells too deeply to analyse (more than {MAX_DEPTH} levels of bash -c, eval or $(...))"
            ));
        }
        let (program, openers) = parse(text, self.nesting)?;
        self.depth += 1;
        self.nesting += openers;
        let outer = std::mem::replace(&mut self.src, text.to_owned());
        for list in &program.complete_commands {
            self.list(list, scope);
        }
        self.src = outer;
        self.nesting -= openers;
        self.depth -= 1;
        Ok(())
    }

    /// A nested shell's text (`bash -c`, `eval`, `$(…)`), its failure recorded as opaque.
    pub fn nested(&mut self, text: &str, scope: &mut Scope, what: &str) {
        if let Err(e) = self.script(text, scope) {
            if self.depth + 1 >= MAX_DEPTH || e.contains("too") {
                self.out.error.get_or_insert(e);
            } else {
                self.opaque(what.to_owned());
            }
        }
    }

    pub fn opaque(&mut self, what: String) {
        self.out.opaque.push(what);
    }

    pub fn write(&mut self, scope: &Scope, e: &Expanded, how: How) {
        if e.text.is_empty() || is_device(&e.text) {
            return;
        }
        self.out.writes.push(Write {
            path: e.text.clone(),
            dir: scope.dir.clone(),
            how,
            exact: e.exact,
        });
    }

    fn list(&mut self, list: &CompoundList, scope: &mut Scope) {
        for item in &list.0 {
            if matches!(item.1, SeparatorOperator::Async) {
                self.and_or(&item.0, &mut scope.clone());
            } else {
                self.and_or(&item.0, scope);
            }
        }
    }

    fn and_or(&mut self, list: &AndOrList, scope: &mut Scope) {
        self.pipeline(&list.first, scope);
        for next in &list.additional {
            match next {
                AndOr::And(p) => self.pipeline(p, scope),
                AndOr::Or(p) => self.conditional(scope, |w, s| w.pipeline(p, s)),
            }
        }
    }

    /// Runs `f` as something that may or may not happen: a directory it changes is unknown
    /// afterwards.
    fn conditional(&mut self, scope: &mut Scope, f: impl FnOnce(&mut Self, &mut Scope)) {
        let before = scope.dir.clone();
        f(self, scope);
        if scope.dir != before {
            scope.dir = Dir::Unknown;
        }
    }

    fn pipeline(&mut self, p: &Pipeline, scope: &mut Scope) {
        if p.seq.len() == 1 {
            self.command(&p.seq[0], scope, None);
            return;
        }
        // Each part of a real pipeline runs in a subshell; the text one part prints is the next
        // part's input (for `printf … | apply_patch`, `cat <<EOF | patch -p1`).
        let mut feed: Option<String> = None;
        for cmd in &p.seq {
            let mut sub = scope.clone();
            feed = self.command(cmd, &mut sub, feed.take());
        }
    }

    /// Walks one command; returns the text it prints when that is plain (`echo`, `printf`,
    /// `cat <<EOF`), for the next part of a pipeline.
    fn command(
        &mut self,
        cmd: &Command,
        scope: &mut Scope,
        stdin: Option<String>,
    ) -> Option<String> {
        match cmd {
            Command::Simple(s) => self.simple(s, scope, stdin),
            Command::Compound(c, redirects) => {
                if let Some(r) = redirects {
                    for r in &r.0 {
                        self.redirect(r, scope);
                    }
                }
                self.compound(c, scope);
                None
            }
            Command::Function(f) => {
                // The body runs when the function is called: walk it as if it were.
                let mut sub = scope.clone();
                self.compound(&f.body.0, &mut sub);
                if let Some(r) = &f.body.1 {
                    for r in &r.0 {
                        self.redirect(r, &sub);
                    }
                }
                None
            }
            Command::ExtendedTest(_) => None,
        }
    }

    fn compound(&mut self, c: &CompoundCommand, scope: &mut Scope) {
        match c {
            CompoundCommand::Arithmetic(a) => {
                // brush reads `( (cmd) )` as the arithmetic `((cmd))`; bash reads two subshells.
                let at: String = self.src.chars().skip(a.loc.start.index).take(2).collect();
                if at.starts_with('(') && at != "((" {
                    self.nested(&a.expr.value, &mut scope.clone(), "( ( ... ) )");
                }
            }
            CompoundCommand::ArithmeticForClause(f) => {
                self.conditional(scope, |w, s| w.list(&f.body.list, s));
            }
            CompoundCommand::BraceGroup(b) => self.list(&b.list, scope),
            CompoundCommand::Subshell(s) => self.list(&s.list, &mut scope.clone()),
            CompoundCommand::ForClause(f) => {
                let values: Option<Vec<Expanded>> = f.values.as_ref().map(|vals| {
                    vals.iter()
                        .flat_map(|v| {
                            self.substitutions_in(&v.value, scope);
                            // `for f in {a,b}.rs`: the words of the braces; a word that
                            // expands to several (`$FILES`, `*.rs`) is inexact.
                            match braces(&v.value) {
                                Some(words) => {
                                    words.iter().map(|w| expand(w, &scope.vars)).collect()
                                }
                                None => vec![expand(&v.value, &scope.vars)],
                            }
                        })
                        .collect()
                });
                self.conditional(scope, |w, s| match values {
                    // A short list of exact names: the body once per name, the variable bound.
                    Some(vals)
                        if vals.len() <= 16 && vals.iter().all(|v| v.exact) && !w.unrolling =>
                    {
                        w.unrolling = true;
                        for v in vals {
                            s.vars.set(&f.variable_name, Some(v.text));
                            w.list(&f.body.list, s);
                        }
                        w.unrolling = false;
                        s.vars.set(&f.variable_name, None);
                    }
                    _ => {
                        s.vars.set(&f.variable_name, None);
                        w.list(&f.body.list, s);
                    }
                });
            }
            CompoundCommand::CaseClause(c) => {
                self.substitutions_in(&c.value.value, scope);
                self.conditional(scope, |w, s| {
                    for item in &c.cases {
                        if let Some(cmd) = &item.cmd {
                            w.list(cmd, s);
                        }
                    }
                });
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition, scope);
                self.conditional(scope, |w, s| {
                    w.list(&i.then, s);
                    for e in i.elses.iter().flatten() {
                        if let Some(c) = &e.condition {
                            w.list(c, s);
                        }
                        w.list(&e.body, s);
                    }
                });
            }
            CompoundCommand::WhileClause(l) | CompoundCommand::UntilClause(l) => {
                self.conditional(scope, |w, s| {
                    w.list(&l.0, s);
                    w.list(&l.1.list, s);
                });
            }
        }
    }

    /// Walks the command substitutions inside a raw word (`$(rm x)` runs too).
    pub fn substitutions_in(&mut self, raw: &str, scope: &Scope) {
        if !raw.contains(['$', '`']) {
            return;
        }
        // The word parser recurses once per nested substitution, on this thread's stack.
        let n = substitution_count(raw);
        if n > MAX_NESTING {
            self.out.error.get_or_insert(format!(
                "a word of the command nests too many substitutions to analyse ({n}, the limit is {MAX_NESTING})"
            ));
            return;
        }
        for sub in substitutions(raw) {
            self.nested(&sub, &mut scope.clone(), "$(...)");
        }
    }

    /// A redirection's write, if it writes a file. Returns `Some` when it replaces standard
    /// input: with the text when that is inline (a here-document, a here-string), `None` when it
    /// is a file.
    fn redirect(&mut self, r: &IoRedirect, scope: &Scope) -> Option<Option<String>> {
        match r {
            IoRedirect::File(fd, kind, target) => {
                let reads_stdin = matches!(
                    kind,
                    IoFileRedirectKind::Read | IoFileRedirectKind::ReadAndWrite
                ) && fd.is_none_or(|f| f == 0);
                let how = match kind {
                    IoFileRedirectKind::Write | IoFileRedirectKind::Clobber => Some(How::Redirect),
                    IoFileRedirectKind::Append => Some(How::Append),
                    IoFileRedirectKind::ReadAndWrite => Some(How::Redirect),
                    IoFileRedirectKind::DuplicateOutput => Some(How::Redirect),
                    IoFileRedirectKind::Read | IoFileRedirectKind::DuplicateInput => None,
                };
                match target {
                    IoFileRedirectTarget::Filename(w) => {
                        self.substitutions_in(&w.value, scope);
                        if let Some(how) = how {
                            let e = expand(&w.value, &scope.vars);
                            self.write(scope, &e, how);
                        }
                    }
                    IoFileRedirectTarget::Duplicate(w) => {
                        // `>&2`, `>&-` duplicate a descriptor; `>& file` writes the file.
                        let e = expand(&w.value, &scope.vars);
                        let fd = e.text.trim_end_matches('-');
                        if how.is_some()
                            && !fd.is_empty()
                            && !fd.chars().all(|c| c.is_ascii_digit())
                            && e.exact
                        {
                            self.write(scope, &e, How::Redirect);
                        }
                    }
                    IoFileRedirectTarget::Fd(_) => {}
                    IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                        self.list(&sub.list, &mut scope.clone());
                    }
                }
                reads_stdin.then_some(None)
            }
            IoRedirect::OutputAndError(w, append) => {
                self.substitutions_in(&w.value, scope);
                let e = expand(&w.value, &scope.vars);
                self.write(scope, &e, if *append { How::Append } else { How::Redirect });
                None
            }
            IoRedirect::HereDocument(_, doc) => {
                let body = &doc.doc.value;
                if !doc.requires_expansion {
                    return Some(Some(body.clone()));
                }
                // `<<EOF` (unquoted): its `$(…)` run when the here-document is read.
                if body.contains("$(") || body.contains('`') {
                    if substitution_count(body) <= MAX_NESTING {
                        self.substitutions_in(body, scope);
                    } else {
                        self.opaque("$(...) in a here-document".to_owned());
                    }
                }
                Some(Some(expand_heredoc(body)))
            }
            IoRedirect::HereString(_, w) => {
                self.substitutions_in(&w.value, scope);
                let mut s = expand(&w.value, &scope.vars).text;
                s.push('\n');
                Some(Some(s))
            }
        }
    }

    fn simple(
        &mut self,
        s: &SimpleCommand,
        scope: &mut Scope,
        stdin: Option<String>,
    ) -> Option<String> {
        let mut words: Vec<&str> = Vec::new();
        let mut assignments: Vec<(&str, &str)> = Vec::new();
        let mut input = stdin;
        let parts = s
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(|i| Part::Item(i, true))
            .chain(s.word_or_name.iter().map(|w| Part::Name(w.value.as_str())))
            .chain(
                s.suffix
                    .iter()
                    .flat_map(|p| p.0.iter())
                    .map(|i| Part::Item(i, false)),
            );
        let mut named = false;
        for part in parts {
            let (item, in_prefix) = match part {
                Part::Name(n) => {
                    self.substitutions_in(n, scope);
                    words.push(n);
                    named = true;
                    continue;
                }
                Part::Item(i, p) => (i, p),
            };
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(r) => {
                    if let Some(text) = self.redirect(r, scope) {
                        input = text;
                    }
                }
                CommandPrefixOrSuffixItem::Word(w) => {
                    self.substitutions_in(&w.value, scope);
                    words.push(&w.value);
                }
                CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    self.substitutions_in(&w.value, scope);
                    if in_prefix && !named {
                        if let (
                            brush_parser::ast::AssignmentName::VariableName(n),
                            brush_parser::ast::AssignmentValue::Scalar(v),
                        ) = (&a.name, &a.value)
                        {
                            assignments.push((n.as_str(), v.value.as_str()));
                            continue;
                        }
                    } else {
                        // `export X=…`, `declare X=…`: a word of the command.
                        words.push(&w.value);
                    }
                }
                CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list, &mut scope.clone());
                }
            }
        }
        if words.is_empty() {
            // `X=value` alone sets a shell variable for what follows.
            for (n, v) in assignments {
                let e = expand(v, &scope.vars);
                scope.vars.set(n, e.exact.then_some(e.text));
            }
            return None;
        }
        let mut argv: Vec<Expanded> = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            // `cp f{,.bak}`, `sed -i … src/{a,b}.rs`: the words bash makes of the braces.
            match braces(w).filter(|_| i > 0) {
                Some(variants) => argv.extend(variants.iter().map(|v| expand(v, &scope.vars))),
                None => argv.push(expand(w, &scope.vars)),
            }
        }
        self.run(&argv, scope, input)
    }
}

/// One part of a simple command, in order: the name or a prefix/suffix item.
enum Part<'a> {
    Name(&'a str),
    Item(&'a CommandPrefixOrSuffixItem, bool),
}

/// A here-document whose delimiter was not quoted: `\` escapes removed; expansions stay.
fn expand_heredoc(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '\\') => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}
