//! A GitHub Actions runner for one composite action, as the real runner
//! runs it: `action.yml` parsed with a YAML parser, the `${{ }}`
//! expressions the action uses evaluated (contexts `github`, `inputs`,
//! `runner`, `steps`, `env`, `strategy`; `always()`, `success()`,
//! `failure()`, `cancelled()`, `hashFiles()`, `format()`; `||`, `&&`, `==`,
//! `!=`, `!`, literals), `if:` with the implicit `success() &&`, each
//! `run:` step through its `shell:` (`bash` is `bash --noprofile --norc
//! -eo pipefail {0}`) with the file commands (`GITHUB_OUTPUT` and
//! `GITHUB_ENV` with the `name<<DELIM` form, `GITHUB_PATH`,
//! `GITHUB_STEP_SUMMARY`) and the workflow commands on stdout (`::notice`,
//! `::warning`, `::error`). A `uses:` step is not run: what it would
//! receive (its `with:`, evaluated) is recorded.
//!
//! Anything it cannot evaluate — an unknown context, function or operator,
//! a malformed file command — fails the test, never evaluates to nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use yaml_rust2::{Yaml, YamlLoader};

use crate::util::{Out, World};

// ───────────────────────────── expressions ─────────────────────────────

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Dot,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Not,
    And,
    Or,
    Eq,
    Ne,
}

fn lex(src: &str) -> Vec<Tok> {
    let b: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        let two: String = b[i..(i + 2).min(b.len())].iter().collect();
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '.' => {
                out.push(Tok::Dot);
                i += 1
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1
            }
            '(' => {
                out.push(Tok::LParen);
                i += 1
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1
            }
            '[' => {
                out.push(Tok::LBracket);
                i += 1
            }
            ']' => {
                out.push(Tok::RBracket);
                i += 1
            }
            _ if two == "&&" => {
                out.push(Tok::And);
                i += 2
            }
            _ if two == "||" => {
                out.push(Tok::Or);
                i += 2
            }
            _ if two == "==" => {
                out.push(Tok::Eq);
                i += 2
            }
            _ if two == "!=" => {
                out.push(Tok::Ne);
                i += 2
            }
            '!' => {
                out.push(Tok::Not);
                i += 1
            }
            '\'' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => panic!("unterminated string in expression {src:?}"),
                        Some('\'') if b.get(i + 1) == Some(&'\'') => {
                            s.push('\'');
                            i += 2
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(&c) => {
                            s.push(c);
                            i += 1
                        }
                    }
                }
                out.push(Tok::Str(s));
            }
            c if c.is_ascii_digit() => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == '.') {
                    i += 1;
                }
                let text: String = b[start..i].iter().collect();
                let n = text
                    .parse()
                    .unwrap_or_else(|_| panic!("bad number {text:?} in {src:?}"));
                out.push(Tok::Num(n));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_' || b[i] == '-') {
                    i += 1;
                }
                out.push(Tok::Ident(b[start..i].iter().collect()));
            }
            _ => panic!("the harness cannot evaluate {c:?} in expression {src:?}"),
        }
    }
    out
}

#[derive(Debug, Clone)]
enum Expr {
    Lit(Value),
    Context(String),
    Prop(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Eq(Box<Expr>, Box<Expr>),
    Ne(Box<Expr>, Box<Expr>),
}

struct Parser<'a> {
    toks: Vec<Tok>,
    at: usize,
    src: &'a str,
}

impl Parser<'_> {
    fn parse(src: &str) -> Expr {
        let mut p = Parser {
            toks: lex(src),
            at: 0,
            src,
        };
        let e = p.or();
        if p.at != p.toks.len() {
            panic!("trailing {:?} in expression {src:?}", &p.toks[p.at..]);
        }
        e
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn next(&mut self) -> Tok {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t.unwrap_or_else(|| panic!("expression {:?} ends early", self.src))
    }
    fn expect(&mut self, t: Tok) {
        let got = self.next();
        assert_eq!(got, t, "in expression {:?}", self.src);
    }
    fn or(&mut self) -> Expr {
        let mut l = self.and();
        while self.peek() == Some(&Tok::Or) {
            self.at += 1;
            l = Expr::Or(Box::new(l), Box::new(self.and()));
        }
        l
    }
    fn and(&mut self) -> Expr {
        let mut l = self.eq();
        while self.peek() == Some(&Tok::And) {
            self.at += 1;
            l = Expr::And(Box::new(l), Box::new(self.eq()));
        }
        l
    }
    fn eq(&mut self) -> Expr {
        let mut l = self.unary();
        loop {
            match self.peek() {
                Some(Tok::Eq) => {
                    self.at += 1;
                    l = Expr::Eq(Box::new(l), Box::new(self.unary()));
                }
                Some(Tok::Ne) => {
                    self.at += 1;
                    l = Expr::Ne(Box::new(l), Box::new(self.unary()));
                }
                _ => return l,
            }
        }
    }
    fn unary(&mut self) -> Expr {
        if self.peek() == Some(&Tok::Not) {
            self.at += 1;
            return Expr::Not(Box::new(self.unary()));
        }
        self.postfix()
    }
    fn postfix(&mut self) -> Expr {
        let mut e = self.primary();
        loop {
            match self.peek() {
                Some(Tok::Dot) => {
                    self.at += 1;
                    match self.next() {
                        Tok::Ident(name) => e = Expr::Prop(Box::new(e), name),
                        t => panic!("{t:?} after `.` in expression {:?}", self.src),
                    }
                }
                Some(Tok::LBracket) => {
                    self.at += 1;
                    let i = self.or();
                    self.expect(Tok::RBracket);
                    e = Expr::Index(Box::new(e), Box::new(i));
                }
                _ => return e,
            }
        }
    }
    fn primary(&mut self) -> Expr {
        match self.next() {
            Tok::Str(s) => Expr::Lit(Value::String(s)),
            Tok::Num(n) => Expr::Lit(json!(n)),
            Tok::LParen => {
                let e = self.or();
                self.expect(Tok::RParen);
                e
            }
            Tok::Ident(id) => match id.as_str() {
                "true" => Expr::Lit(Value::Bool(true)),
                "false" => Expr::Lit(Value::Bool(false)),
                "null" => Expr::Lit(Value::Null),
                _ if self.peek() == Some(&Tok::LParen) => {
                    self.at += 1;
                    let mut args = Vec::new();
                    if self.peek() != Some(&Tok::RParen) {
                        loop {
                            args.push(self.or());
                            if self.peek() == Some(&Tok::Comma) {
                                self.at += 1;
                            } else {
                                break;
                            }
                        }
                    }
                    self.expect(Tok::RParen);
                    Expr::Call(id.to_ascii_lowercase(), args)
                }
                _ => Expr::Context(id),
            },
            t => panic!("unexpected {t:?} in expression {:?}", self.src),
        }
    }
}

fn has_status_call(e: &Expr) -> bool {
    match e {
        Expr::Call(name, args) => {
            matches!(
                name.as_str(),
                "always" | "success" | "failure" | "cancelled"
            ) || args.iter().any(has_status_call)
        }
        Expr::Prop(a, _) | Expr::Not(a) => has_status_call(a),
        Expr::Index(a, b) | Expr::And(a, b) | Expr::Or(a, b) | Expr::Eq(a, b) | Expr::Ne(a, b) => {
            has_status_call(a) || has_status_call(b)
        }
        Expr::Lit(_) | Expr::Context(_) => false,
    }
}

/// `github.token` in the harness (what `vetto github` should send).
pub const HARNESS_TOKEN: &str = "ghs_harness_token_CANARY";

/// What an expression is evaluated against.
pub struct Scope<'a> {
    /// `github`, `inputs`, `runner`, `steps`, `env`, `strategy`.
    pub contexts: &'a Map<String, Value>,
    /// A step before this one failed (for `success()`/`failure()`).
    pub failed: bool,
    /// Where `hashFiles()` looks.
    pub workspace: &'a Path,
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn to_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) if s.trim().is_empty() => 0.0,
        Value::String(s) => s.trim().parse().unwrap_or(f64::NAN),
        Value::Array(_) | Value::Object(_) => f64::NAN,
    }
}

/// GitHub's `==`: strings compare case-insensitively; different types
/// compare as numbers; objects only by identity (never equal here).
fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.eq_ignore_ascii_case(y),
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => to_number(a) == to_number(b),
    }
}

/// An expression value as text (`${{ }}` interpolation, `format()`).
pub fn to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(_) => "Array".into(),
        Value::Object(_) => "Object".into(),
    }
}

fn eval(e: &Expr, s: &Scope) -> Value {
    match e {
        Expr::Lit(v) => v.clone(),
        Expr::Context(name) => match s.contexts.get(name) {
            Some(v) => v.clone(),
            None => panic!("the harness has no context {name:?}"),
        },
        Expr::Prop(obj, name) => match eval(obj, s) {
            // Property names are case-insensitive.
            Value::Object(m) => m
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
                .unwrap_or(Value::Null),
            _ => Value::Null,
        },
        Expr::Index(obj, i) => {
            let key = to_text(&eval(i, s));
            eval(&Expr::Prop(obj.clone(), key), s)
        }
        Expr::Not(a) => Value::Bool(!truthy(&eval(a, s))),
        Expr::And(a, b) => {
            let l = eval(a, s);
            if truthy(&l) { eval(b, s) } else { l }
        }
        Expr::Or(a, b) => {
            let l = eval(a, s);
            if truthy(&l) { l } else { eval(b, s) }
        }
        Expr::Eq(a, b) => Value::Bool(loose_eq(&eval(a, s), &eval(b, s))),
        Expr::Ne(a, b) => Value::Bool(!loose_eq(&eval(a, s), &eval(b, s))),
        Expr::Call(name, args) => {
            let vals: Vec<Value> = args.iter().map(|a| eval(a, s)).collect();
            call(name, &vals, s)
        }
    }
}

fn call(name: &str, args: &[Value], s: &Scope) -> Value {
    match (name, args.len()) {
        ("always", 0) => Value::Bool(true),
        ("success", 0) => Value::Bool(!s.failed),
        ("failure", 0) => Value::Bool(s.failed),
        ("cancelled", 0) => Value::Bool(false),
        ("format", n) if n >= 1 => Value::String(format_fn(&to_text(&args[0]), &args[1..])),
        ("hashfiles", n) if n >= 1 => Value::String(hash_files(args, s.workspace)),
        _ => panic!(
            "the harness cannot evaluate the function {name}() with {} argument(s)",
            args.len()
        ),
    }
}

/// `format('{0} and {{literal}}', x)`.
fn format_fn(fmt: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut rest = fmt;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(end) = tail.find('}').filter(|_| tail.starts_with('{')) {
            let n: usize = tail[1..end]
                .parse()
                .unwrap_or_else(|_| panic!("format({fmt:?}): bad placeholder"));
            let v = args
                .get(n)
                .unwrap_or_else(|| panic!("format({fmt:?}): no argument {n}"));
            out.push_str(&to_text(v));
            rest = &tail[end + 1..];
        } else {
            panic!("format({fmt:?}): unbalanced brace");
        }
    }
    out.push_str(rest);
    out
}

/// `hashFiles(path, ...)` for literal paths under the workspace (no glob
/// patterns: the harness refuses them): the SHA-256 of the files' SHA-256
/// digests, in order; `''` when none exists.
fn hash_files(args: &[Value], workspace: &Path) -> String {
    let mut outer = Sha256::new();
    let mut any = false;
    for a in args {
        let p = to_text(a);
        assert!(
            !p.contains(['*', '?', '[', '!']),
            "the harness evaluates hashFiles() of literal paths only, not {p:?}"
        );
        let path = workspace.join(&p);
        if let Ok(bytes) = std::fs::read(&path) {
            outer.update(Sha256::digest(&bytes));
            any = true;
        }
    }
    if any {
        hex(&outer.finalize())
    } else {
        String::new()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Evaluate one expression (the text between `${{` and `}}`).
pub fn evaluate(expr: &str, s: &Scope) -> Value {
    eval(&Parser::parse(expr), s)
}

/// Replace every `${{ … }}` in `text`.
pub fn interpolate(text: &str, s: &Scope) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let body = &rest[i + 3..];
        let end = expression_end(body).unwrap_or_else(|| panic!("unterminated ${{{{ in {text:?}"));
        out.push_str(&to_text(&evaluate(&body[..end], s)));
        rest = &body[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Where the `}}` closing an expression is (outside string literals).
fn expression_end(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => in_str = !in_str,
            b'}' if !in_str && b.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// An `if:`: `${{ }}` optional; `success() && (…)` unless it calls a
/// status function itself.
pub fn condition(text: &str, s: &Scope) -> bool {
    let t = text.trim();
    let t = match t.strip_prefix("${{").and_then(|r| r.strip_suffix("}}")) {
        Some(inner) => inner,
        None => t,
    };
    let e = Parser::parse(t);
    let v = truthy(&eval(&e, s));
    if has_status_call(&e) {
        v
    } else {
        v && !s.failed
    }
}

// ───────────────────────────── file and workflow commands ─────────────────────────────

/// `name=value` and `name<<DELIM … DELIM` lines ($GITHUB_OUTPUT, $GITHUB_ENV).
pub fn parse_file_command(text: &str, what: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let heredoc = line.find("<<");
        let eq = line.find('=');
        match (heredoc, eq) {
            (Some(h), e) if e.is_none_or(|e| h < e) => {
                let (name, delim) = (&line[..h], &line[h + 2..]);
                assert!(
                    !name.is_empty() && !delim.is_empty(),
                    "{what}: bad line {line:?}"
                );
                let mut value = Vec::new();
                loop {
                    match lines.next() {
                        Some(l) if l == delim => break,
                        Some(l) => value.push(l),
                        None => panic!("{what}: {name}<<{delim} is never closed"),
                    }
                }
                out.push((name.to_string(), value.join("\n")));
            }
            (_, Some(e)) => {
                assert!(e > 0, "{what}: bad line {line:?}");
                out.push((line[..e].to_string(), line[e + 1..].to_string()));
            }
            _ => panic!("{what}: invalid format {line:?}"),
        }
    }
    out
}

/// A workflow command a step printed (`::notice title=T::message`).
#[derive(Debug, Clone)]
pub struct Annotation {
    pub kind: String,
    pub message: String,
}

fn workflow_commands(stdout: &str) -> Vec<Annotation> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("::")?;
            let (head, message) = rest.split_once("::")?;
            let kind = head.split(' ').next().unwrap_or_default();
            matches!(kind, "notice" | "warning" | "error").then(|| Annotation {
                kind: kind.to_string(),
                message: message.to_string(),
            })
        })
        .collect()
}

// ───────────────────────────── the runner ─────────────────────────────

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    Skipped,
}

/// One step as it ran (or did not).
#[derive(Debug)]
pub struct StepRun {
    pub name: String,
    pub outcome: Outcome,
    /// `uses:` steps: the action and its evaluated `with:`.
    pub uses: Option<String>,
    pub with: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
    pub out: Option<Out>,
    /// How long it ran (in the dump, to see where a slow job spends it).
    pub took: std::time::Duration,
}

/// The whole action's run.
#[derive(Debug)]
pub struct ActionRun {
    pub steps: Vec<StepRun>,
    pub outputs: BTreeMap<String, String>,
    pub summary: String,
    pub annotations: Vec<Annotation>,
    pub failed: bool,
}

impl ActionRun {
    pub fn step(&self, name: &str) -> &StepRun {
        self.steps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step {name:?}\n{}", self.dump()))
    }
    /// The one `uses:` step of `action` (`owner/repo[/path]`, without `@…`).
    pub fn uses(&self, action: &str) -> &StepRun {
        self.steps
            .iter()
            .find(|s| {
                s.uses
                    .as_deref()
                    .and_then(|u| u.split_once('@'))
                    .is_some_and(|(a, _)| a == action)
            })
            .unwrap_or_else(|| panic!("no step uses {action}\n{}", self.dump()))
    }
    pub fn output(&self, name: &str) -> &str {
        self.outputs
            .get(name)
            .unwrap_or_else(|| panic!("the action has no output {name:?}"))
    }
    pub fn annotations_of(&self, kind: &str) -> Vec<&Annotation> {
        self.annotations.iter().filter(|a| a.kind == kind).collect()
    }
    /// Every step's outcome and output, for assertion messages.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for st in &self.steps {
            s.push_str(&format!("── {} [{:?}, {:?}]", st.name, st.outcome, st.took));
            if let Some(u) = &st.uses {
                s.push_str(&format!(" uses {u} with {:?}", st.with));
            }
            s.push('\n');
            if let Some(o) = &st.out {
                s.push_str(&o.dump());
                s.push('\n');
            }
        }
        s.push_str(&format!("outputs: {:?}\n", self.outputs));
        s
    }
}

/// A job that runs the action once.
pub struct Job<'a> {
    /// Steps run as the world's user, with its environment, in its project
    /// (the workspace).
    pub world: &'a World,
    /// `github.action_path`: a directory holding action.yml.
    pub action_path: PathBuf,
    pub inputs: BTreeMap<String, String>,
    /// `github.event_name` and the event payload (`github.event`).
    pub event_name: String,
    pub event: Value,
    /// `github.base_ref` (pull requests).
    pub base_ref: String,
    pub repository: String,
    /// Workflow-level `env:` (visible to every step unless its own `env:`
    /// sets the name).
    pub env: BTreeMap<String, String>,
}

impl<'a> Job<'a> {
    pub fn new(world: &'a World, action_path: &Path) -> Job<'a> {
        Job {
            world,
            action_path: action_path.to_path_buf(),
            inputs: BTreeMap::new(),
            event_name: "push".into(),
            event: json!({}),
            base_ref: String::new(),
            repository: "octo/app".into(),
            env: BTreeMap::new(),
        }
    }

    pub fn input(mut self, name: &str, value: &str) -> Self {
        self.inputs.insert(name.into(), value.into());
        self
    }

    /// Run every step of `action_path/action.yml`.
    pub fn run(&self) -> ActionRun {
        let yml = self.action_path.join("action.yml");
        let text = std::fs::read_to_string(&yml)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", yml.display()));
        let docs = YamlLoader::load_from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", yml.display()));
        let action = &docs[0];
        assert_eq!(action["runs"]["using"].as_str(), Some("composite"));

        let runner_temp = self.world.root.join("runner-temp");
        self.world.write(&runner_temp.join(".keep"), "");
        let event_path = runner_temp.join("event.json");
        self.world.write(&event_path, &self.event.to_string());
        let workspace = self.world.project.clone();

        // inputs: the declared ones, defaults filled in; an undeclared one
        // fails (the runner only warns, but it is a typo in a test).
        let mut inputs = Map::new();
        let declared = action["inputs"].as_hash().cloned().unwrap_or_default();
        for (k, v) in &declared {
            let name = k.as_str().unwrap_or_default().to_string();
            let default = match &v["default"] {
                Yaml::String(s) => s.clone(),
                Yaml::Boolean(b) => b.to_string(),
                Yaml::BadValue => String::new(),
                other => panic!("input {name}: default {other:?}"),
            };
            inputs.insert(name, Value::String(default));
        }
        for (k, v) in &self.inputs {
            assert!(inputs.contains_key(k), "action.yml declares no input {k:?}");
            inputs.insert(k.clone(), Value::String(v.clone()));
        }

        let (os, arch) = runner_os_arch();
        let job_id = "test";
        let github = json!({
            "action_path": self.action_path.to_string_lossy(),
            "workspace": workspace.to_string_lossy(),
            "event_name": self.event_name,
            "event": self.event,
            "base_ref": self.base_ref,
            "repository": self.repository,
            "job": job_id,
            "server_url": "https://github.com",
            "token": HARNESS_TOKEN,
        });
        let mut contexts = Map::new();
        contexts.insert("github".into(), github);
        contexts.insert("inputs".into(), Value::Object(inputs));
        contexts.insert(
            "runner".into(),
            json!({"os": os, "arch": arch, "temp": runner_temp.to_string_lossy()}),
        );
        contexts.insert("strategy".into(), json!({"job-index": 0, "job-total": 1}));
        contexts.insert("steps".into(), json!({}));
        // Defaults may be expressions (`${{ github.token }}`): the runner
        // evaluates them against the job's contexts.
        let defaults: Vec<(String, String)> = contexts["inputs"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| !self.inputs.contains_key(*k) && to_text(v).contains("${{"))
            .map(|(k, v)| (k.clone(), to_text(v)))
            .collect();
        for (name, default) in defaults {
            let value = interpolate(
                &default,
                &Scope {
                    contexts: &contexts,
                    failed: false,
                    workspace: &workspace,
                },
            );
            if let Some(Value::Object(inputs)) = contexts.get_mut("inputs") {
                inputs.insert(name, Value::String(value));
            }
        }
        let mut added_env: BTreeMap<String, String> = BTreeMap::new();
        let mut added_path: Vec<String> = Vec::new();

        let runner_env: Vec<(&str, String)> = vec![
            ("CI", "true".into()),
            ("GITHUB_ACTIONS", "true".into()),
            ("GITHUB_WORKSPACE", workspace.to_string_lossy().into()),
            (
                "GITHUB_ACTION_PATH",
                self.action_path.to_string_lossy().into(),
            ),
            ("GITHUB_EVENT_NAME", self.event_name.clone()),
            ("GITHUB_EVENT_PATH", event_path.to_string_lossy().into()),
            ("GITHUB_BASE_REF", self.base_ref.clone()),
            ("GITHUB_REPOSITORY", self.repository.clone()),
            ("GITHUB_JOB", job_id.into()),
            ("GITHUB_SERVER_URL", "https://github.com".into()),
            ("RUNNER_OS", os.into()),
            ("RUNNER_ARCH", arch.into()),
            ("RUNNER_TEMP", runner_temp.to_string_lossy().into()),
        ];

        let mut run = ActionRun {
            steps: Vec::new(),
            outputs: BTreeMap::new(),
            summary: String::new(),
            annotations: Vec::new(),
            failed: false,
        };
        let Some(steps) = action["runs"]["steps"].as_vec() else {
            panic!("action.yml has no steps");
        };
        for (n, step) in steps.iter().enumerate() {
            let mut env_ctx = Map::new();
            for (k, v) in self.env.iter().chain(&added_env) {
                env_ctx.insert(k.clone(), Value::String(v.clone()));
            }
            contexts.insert("env".into(), Value::Object(env_ctx));
            let scope = Scope {
                contexts: &contexts,
                failed: run.failed,
                workspace: &workspace,
            };
            let name = step["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("step {n}"));
            let id = step["id"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("__{n}"));
            let cond = match &step["if"] {
                Yaml::BadValue => "success()".to_string(),
                Yaml::String(s) => s.clone(),
                Yaml::Boolean(b) => b.to_string(),
                other => panic!("step {name}: if {other:?}"),
            };
            let mut record = StepRun {
                name: name.clone(),
                outcome: Outcome::Skipped,
                uses: step["uses"].as_str().map(str::to_string),
                with: BTreeMap::new(),
                outputs: BTreeMap::new(),
                out: None,
                took: std::time::Duration::ZERO,
            };
            if condition(&cond, &scope) {
                if record.uses.is_some() {
                    for (k, v) in step["with"].as_hash().cloned().unwrap_or_default() {
                        let key = k.as_str().unwrap_or_default().to_string();
                        let val = yaml_text(&v, &name);
                        record.with.insert(key, interpolate(&val, &scope));
                    }
                    record.outcome = Outcome::Success;
                } else {
                    let script = step["run"]
                        .as_str()
                        .unwrap_or_else(|| panic!("step {name} has neither run nor uses"));
                    let script = interpolate(script, &scope);
                    let mut step_env: BTreeMap<String, String> = BTreeMap::new();
                    for (k, v) in step["env"].as_hash().cloned().unwrap_or_default() {
                        let key = k.as_str().unwrap_or_default().to_string();
                        step_env.insert(key, interpolate(&yaml_text(&v, &name), &scope));
                    }
                    let shell = step["shell"]
                        .as_str()
                        .unwrap_or_else(|| panic!("step {name}: a composite run step needs shell"));
                    let files = FileCommands::new(self.world, &runner_temp, n);
                    let script_path = runner_temp.join(format!("step-{n}.sh"));
                    self.world.write(&script_path, &script);
                    let argv = shell_argv(shell, &script_path);
                    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                    let mut r = self.world.bare(&argv).cwd(&workspace);
                    for (k, v) in &runner_env {
                        r = r.env(k, v);
                    }
                    for (k, v) in self.env.iter().chain(&added_env).chain(&step_env) {
                        r = r.env(k, v);
                    }
                    let path = added_path
                        .iter()
                        .rev()
                        .cloned()
                        .chain([self
                            .env
                            .get("PATH")
                            .cloned()
                            .unwrap_or_else(|| crate::util::PATH.to_string())])
                        .collect::<Vec<_>>()
                        .join(":");
                    r = r
                        .env("PATH", path)
                        .env("GITHUB_OUTPUT", &files.output)
                        .env("GITHUB_ENV", &files.env)
                        .env("GITHUB_PATH", &files.path)
                        .env("GITHUB_STEP_SUMMARY", &files.summary)
                        .env("GITHUB_STATE", &files.state);
                    let started = std::time::Instant::now();
                    let out = r.run();
                    record.took = started.elapsed();
                    record.outcome = if out.status.success() {
                        Outcome::Success
                    } else {
                        Outcome::Failure
                    };
                    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
                    // The runner applies the file commands of a failed step too.
                    for (k, v) in
                        parse_file_command(&read(&files.output), &format!("{name}: GITHUB_OUTPUT"))
                    {
                        record.outputs.insert(k, v);
                    }
                    for (k, v) in
                        parse_file_command(&read(&files.env), &format!("{name}: GITHUB_ENV"))
                    {
                        added_env.insert(k, v);
                    }
                    added_path.extend(
                        read(&files.path)
                            .lines()
                            .filter(|l| !l.is_empty())
                            .map(str::to_string),
                    );
                    run.summary.push_str(&read(&files.summary));
                    run.annotations.extend(workflow_commands(&out.stdout()));
                    record.out = Some(out);
                }
            }
            if record.outcome == Outcome::Failure {
                run.failed = true;
            }
            let outcome = match record.outcome {
                Outcome::Success => "success",
                Outcome::Failure => "failure",
                Outcome::Skipped => "skipped",
            };
            let outputs: Map<String, Value> = record
                .outputs
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            if let Some(Value::Object(steps_ctx)) = contexts.get_mut("steps") {
                steps_ctx.insert(
                    id,
                    json!({"outputs": outputs, "outcome": outcome, "conclusion": outcome}),
                );
            }
            run.steps.push(record);
        }

        let scope = Scope {
            contexts: &contexts,
            failed: run.failed,
            workspace: &workspace,
        };
        for (k, v) in action["outputs"].as_hash().cloned().unwrap_or_default() {
            let key = k.as_str().unwrap_or_default().to_string();
            let value = v["value"]
                .as_str()
                .unwrap_or_else(|| panic!("output {key} has no value"));
            run.outputs.insert(key, interpolate(value, &scope));
        }
        run
    }
}

fn yaml_text(v: &Yaml, step: &str) -> String {
    match v {
        Yaml::String(s) => s.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Integer(i) => i.to_string(),
        other => panic!("step {step}: value {other:?}"),
    }
}

/// The runner's `shell:` table (Linux).
fn shell_argv(shell: &str, script: &Path) -> Vec<String> {
    let s = script.to_string_lossy().into_owned();
    match shell {
        "bash" => vec!["bash", "--noprofile", "--norc", "-eo", "pipefail", &s]
            .into_iter()
            .map(str::to_string)
            .collect(),
        "sh" => vec!["sh".into(), "-e".into(), s],
        custom if custom.contains("{0}") => custom
            .split_whitespace()
            .map(|w| w.replace("{0}", &s))
            .collect(),
        other => panic!("the harness does not know the shell {other:?}"),
    }
}

fn runner_os_arch() -> (&'static str, &'static str) {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "X64",
        "aarch64" => "ARM64",
        "x86" => "X86",
        "arm" => "ARM",
        other => panic!("no runner.arch for {other}"),
    };
    ("Linux", arch)
}

/// One step's fresh file-command files, owned by the job's user.
struct FileCommands {
    output: PathBuf,
    env: PathBuf,
    path: PathBuf,
    summary: PathBuf,
    state: PathBuf,
}

impl FileCommands {
    fn new(world: &World, temp: &Path, n: usize) -> FileCommands {
        let dir = temp.join("_runner_file_commands");
        let f = |kind: &str| {
            let p = dir.join(format!("{kind}_{n}"));
            world.write(&p, "");
            p
        };
        FileCommands {
            output: f("set_output"),
            env: f("set_env"),
            path: f("add_path"),
            summary: f("step_summary"),
            state: f("save_state"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope_eval(expr: &str) -> Value {
        let contexts = json!({
            "inputs": {"tier": "auto", "upload-sarif": "true", "empty": ""},
            "steps": {"run": {"outputs": {"exit-code": "0", "violations": "3"}}},
            "github": {"event": {}},
        });
        let Value::Object(m) = contexts else {
            unreachable!()
        };
        let s = Scope {
            contexts: &m,
            failed: false,
            workspace: Path::new("/nonexistent"),
        };
        evaluate(expr, &s)
    }

    #[test]
    fn expressions_evaluate_as_the_runner_does() {
        assert_eq!(
            scope_eval("inputs.upload-sarif == 'TRUE'"),
            json!(true),
            "case-insensitive"
        );
        assert_eq!(scope_eval("inputs.empty || 'fallback'"), json!("fallback"));
        assert_eq!(scope_eval("inputs.tier && 'yes'"), json!("yes"));
        assert_eq!(
            scope_eval("steps.run.outputs.exit-code != '0'"),
            json!(false)
        );
        assert_eq!(
            scope_eval("steps.run.outputs.exit-code == 0"),
            json!(true),
            "numeric coercion"
        );
        assert_eq!(scope_eval("steps.missing.outputs.x == ''"), json!(true));
        assert_eq!(scope_eval("!github.event.pull_request"), json!(true));
        assert_eq!(
            scope_eval("format('{0}/{1} {{x}}', 'a', 3)"),
            json!("a/3 {x}")
        );
        assert_eq!(scope_eval("hashFiles('no-such-file')"), json!(""));
        assert_eq!(scope_eval("inputs['tier']"), json!("auto"));
    }

    #[test]
    #[should_panic(expected = "no context")]
    fn an_unknown_context_fails_loudly() {
        scope_eval("secrets.TOKEN");
    }

    #[test]
    #[should_panic(expected = "cannot evaluate the function")]
    fn an_unknown_function_fails_loudly() {
        scope_eval("toJSON(inputs)");
    }

    #[test]
    fn heredoc_outputs_parse() {
        let got = parse_file_command("a=1\nmulti<<EOF\nx\ny=z\nEOF\nb=\n", "t");
        assert_eq!(
            got,
            vec![
                ("a".into(), "1".into()),
                ("multi".into(), "x\ny=z".into()),
                ("b".into(), String::new())
            ]
        );
    }
}
