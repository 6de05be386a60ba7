//! The rule language of the selector's policies: the `when` of a `[[rule]]`, parsed when its
//! policy is loaded and evaluated at every decision.
//!
//! A `when` is comparisons `OPERAND OP OPERAND` (OP one of `< <= > >= == !=`; an operand is a
//! feature, a param or a number; at least one side a feature) joined by `and` and `or`, `and`
//! binding tighter; no parentheses. A rule without `when` always matches.
//!
//! Names are resolved to feature and param positions when a condition is parsed, so evaluating
//! it reads numbers and allocates nothing.

use super::features::Features;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
        }
    }

    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Operand {
    /// Position in [`Features::NAMES`].
    Feature(usize),
    /// Position in the policy's params.
    Param(usize),
    Number(f64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Comparison {
    left: Operand,
    cmp: Cmp,
    right: Operand,
}

/// Comparisons in disjunctive form: any of the groups, all comparisons within a group.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Condition {
    any: Vec<Vec<Comparison>>,
}

/// One `[[rule]]` of a policy, resolved.
#[derive(Clone, Debug)]
pub(super) struct Rule {
    /// `None`: the rule always matches.
    pub(super) when: Option<Condition>,
    /// Position in the policy's algorithms.
    pub(super) algorithm: usize,
}

/// A named number of `[params]`, which conditions may compare with.
#[derive(Clone, Debug)]
pub(super) struct PolicyParam {
    pub(super) name: String,
    pub(super) value: f64,
}

impl PolicyParam {
    /// What is wrong with the param, if anything.
    pub(super) fn check(&self) -> Option<String> {
        let name = &self.name;
        if !is_identifier(name) || is_keyword(name) {
            return Some(format!("[params] {name:?}: a param's name is a word of letters, digits and '_' (not `and`/`or`)"));
        }
        if Features::index_of(name).is_some() {
            return Some(format!("[params] {name:?} is the name of a feature; give the param another name"));
        }
        if !self.value.is_finite() {
            return Some(format!("[params] {name} = {}: not a finite number", self.value));
        }
        None
    }
}

impl Condition {
    /// Parse a `when`; names are resolved to positions in [`Features::NAMES`] and in `params`.
    pub(super) fn parse(text: &str, params: &[PolicyParam]) -> Result<Condition, String> {
        let tokens = tokenize(text)?;
        if tokens.is_empty() {
            return Err("empty condition; leave `when` out for a rule that always matches".to_string());
        }
        let mut tokens = tokens.iter().peekable();
        let mut any = vec![Vec::new()];
        loop {
            let left = operand(tokens.next(), params)?;
            let cmp = match tokens.next() {
                Some(Token::Cmp(c)) => *c,
                other => return Err(format!("expected one of < <= > >= == != after {}, found {}", left_text(left, params), describe(other))),
            };
            let right = operand(tokens.next(), params)?;
            if !matches!(left, Operand::Feature(_)) && !matches!(right, Operand::Feature(_)) {
                return Err(format!(
                    "{} {} {} compares no feature; features: {}",
                    left_text(left, params),
                    cmp.symbol(),
                    left_text(right, params),
                    Features::NAMES.join(", ")
                ));
            }
            any.last_mut().expect("a group is always open").push(Comparison { left, cmp, right });
            match tokens.next() {
                None => break,
                Some(Token::Word(w)) if w.eq_ignore_ascii_case("and") => {}
                Some(Token::Word(w)) if w.eq_ignore_ascii_case("or") => any.push(Vec::new()),
                other => return Err(format!("expected `and` or `or` after a comparison, found {}", describe(other))),
            }
        }
        Ok(Condition { any })
    }

    /// Whether the condition holds for `features`; `params` are the ones it was parsed with.
    /// Allocates nothing.
    pub(super) fn holds(&self, params: &[PolicyParam], features: &Features) -> bool {
        self.any.iter().any(|group| {
            group.iter().all(|c| c.cmp.holds(value(c.left, params, features), value(c.right, params, features)))
        })
    }

    /// The condition as text, params shown with their values: `min_rtt_ms < rtt_threshold_ms (50)`.
    pub(super) fn render(&self, params: &[PolicyParam]) -> String {
        let group = |g: &Vec<Comparison>| {
            g.iter()
                .map(|c| format!("{} {} {}", render_operand(c.left, params), c.cmp.symbol(), render_operand(c.right, params)))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        self.any.iter().map(group).collect::<Vec<_>>().join(" or ")
    }
}

fn value(operand: Operand, params: &[PolicyParam], features: &Features) -> f64 {
    match operand {
        Operand::Feature(i) => features.at(i),
        Operand::Param(i) => params[i].value,
        Operand::Number(x) => x,
    }
}

fn render_operand(operand: Operand, params: &[PolicyParam]) -> String {
    match operand {
        Operand::Feature(i) => Features::NAMES[i].to_string(),
        Operand::Param(i) => format!("{} ({})", params[i].name, params[i].value),
        Operand::Number(x) => x.to_string(),
    }
}

// ---- Parsing -------------------------------------------------------------------------------

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_keyword(s: &str) -> bool {
    s.eq_ignore_ascii_case("and") || s.eq_ignore_ascii_case("or")
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Token<'a> {
    Word(&'a str),
    Number(f64),
    Cmp(Cmp),
}

fn tokenize(text: &str) -> Result<Vec<Token<'_>>, String> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let column = i + 1;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push(Token::Word(&text[start..i]));
        } else if c.is_ascii_digit() || c == '.' || (c == '-' && bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit() || *b == b'.')) {
            let start = i;
            i += 1;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || bytes[i] == b'.'
                    || (matches!(bytes[i], b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            let word = &text[start..i];
            let x: f64 = word.parse().map_err(|_| {
                format!("{word:?} (column {column}) is not a number (numbers take no unit: the feature's name says it, e.g. mean_rtt_ms)")
            })?;
            if !x.is_finite() {
                return Err(format!("{word:?} (column {column}) is not a finite number"));
            }
            tokens.push(Token::Number(x));
        } else {
            let two = text.get(i..i + 2).unwrap_or("");
            let (cmp, len) = match (two, c) {
                ("<=", _) => (Cmp::Le, 2),
                (">=", _) => (Cmp::Ge, 2),
                ("==", _) => (Cmp::Eq, 2),
                ("!=", _) => (Cmp::Ne, 2),
                (_, '<') => (Cmp::Lt, 1),
                (_, '>') => (Cmp::Gt, 1),
                (_, '=') => return Err(format!("'=' at column {column}: compare with ==")),
                (_, '(' | ')') => {
                    return Err(format!("parenthesis at column {column}: not supported; `and` binds tighter than `or`"))
                }
                _ => return Err(format!("unexpected character {:?} at column {column}", text[i..].chars().next().unwrap_or(c))),
            };
            tokens.push(Token::Cmp(cmp));
            i += len;
        }
    }
    Ok(tokens)
}

fn describe(token: Option<&Token<'_>>) -> String {
    match token {
        None => "the end".to_string(),
        Some(Token::Word(w)) => format!("{w:?}"),
        Some(Token::Number(x)) => format!("{x}"),
        Some(Token::Cmp(c)) => format!("{:?}", c.symbol()),
    }
}

fn left_text(operand: Operand, params: &[PolicyParam]) -> String {
    match operand {
        Operand::Feature(i) => Features::NAMES[i].to_string(),
        Operand::Param(i) => params[i].name.clone(),
        Operand::Number(x) => x.to_string(),
    }
}

fn operand(token: Option<&Token<'_>>, params: &[PolicyParam]) -> Result<Operand, String> {
    match token {
        Some(Token::Number(x)) => Ok(Operand::Number(*x)),
        Some(Token::Word(w)) if !is_keyword(w) => {
            if let Some(i) = Features::index_of(w) {
                return Ok(Operand::Feature(i));
            }
            if let Some(i) = params.iter().position(|p| p.name == *w) {
                return Ok(Operand::Param(i));
            }
            let names = params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>();
            Err(format!(
                "unknown name {w:?}; features: {}; params: {}",
                Features::NAMES.join(", "),
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ))
        }
        other => Err(format!("expected a feature, a param or a number, found {}", describe(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The params the conditions below may name.
    fn params() -> Vec<PolicyParam> {
        vec![PolicyParam { name: "limit_ms".to_string(), value: 40.0 }]
    }

    fn holds(when: &str, features: Features) -> bool {
        let params = params();
        Condition::parse(when, &params).unwrap().holds(&params, &features)
    }

    #[test]
    fn a_bad_condition_is_explained() {
        for (when, expected) in [
            ("mean_rtt_ms < 40ms", &["\"40ms\"", "not a number"][..]),
            ("mean_rtt_ms = 4", &["compare with =="]),
            ("(mean_rtt_ms < 4)", &["parenthesis", "and` binds tighter"]),
            ("mean_rtt_ms < limit_ms and", &["expected a feature, a param or a number, found the end"]),
            ("mean_rtt_ms limit_ms", &["expected one of < <= > >= == != after mean_rtt_ms"]),
            ("mean_rtt_ms < 4 loss_rate > 0", &["expected `and` or `or`"]),
            ("limit_ms < 4", &["compares no feature"]),
        ] {
            let e = Condition::parse(when, &params()).unwrap_err();
            for part in expected {
                assert!(e.contains(part), "{when:?}: {e:?} lacks {part:?}");
            }
        }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let when = "loss_rate > 0.5 or mean_rtt_ms < limit_ms and loss_rate >= 0.1";
        let pick = |rtt: f64, loss: f64| holds(when, Features { mean_rtt_ms: rtt, loss_rate: loss, ..Features::default() });
        assert!(pick(100.0, 0.6)); // the `or` side alone
        assert!(pick(10.0, 0.2)); // both sides of the `and`
        assert!(!pick(10.0, 0.0)); // half of the `and`
        assert!(!pick(100.0, 0.2));
    }

    #[test]
    fn comparisons_and_numbers() {
        let when = "-1 != samples and 2.5e1 >= mean_rtt_ms and bytes == 0";
        assert!(holds(when, Features { mean_rtt_ms: 25.0, ..Features::default() }));
        assert!(!holds(when, Features { mean_rtt_ms: 25.5, ..Features::default() }));
        assert!(!holds(when, Features { mean_rtt_ms: 2.0, bytes: 1.0, ..Features::default() }));
    }

    #[test]
    fn a_condition_renders_params_with_their_values() {
        let params = params();
        let c = Condition::parse("mean_rtt_ms < limit_ms or loss_rate>0", &params).unwrap();
        assert_eq!(c.render(&params), "mean_rtt_ms < limit_ms (40) or loss_rate > 0");
    }
}
