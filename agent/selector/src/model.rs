//! Learned models: scikit-learn tree ensembles (a random forest, or a decision tree as a forest
//! of one), exported by the training notebook as a versioned JSON file and evaluated here with
//! scikit-learn's semantics, so the agent chooses exactly what `predict` chose in training.
//!
//! The file (`learner/README.md` documents it; format version [`VERSION`]):
//!
//! ```json
//! {"format": "ccswitch-model", "version": 1, "kind": "forest", "name": "NAME",
//!  "features": ["min_rtt_ms", "loss_rate"], "classes": ["bbr", "cubic"],
//!  "window": {"kind": "first", "samples": 20}, "decide": {"min_samples": 8},
//!  "trees": [{"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
//!             "threshold": [12.5, -2.0, -2.0], "value": [[0.5, 0.5], [1, 0], [0, 1]]}],
//!  "provenance": {...}}
//! ```
//!
//! Optional fields (absent in files exported before them):
//!
//! - `"objective": "SPEC"`: what the model was trained for, an [`Objective`] spec (absent:
//!   `tct`); a policy that names another objective refuses the model.
//! - per tree, `"cost"`: parallel to `value`, each node's expected relative regret of every
//!   class under the objective (0: as good as the best on the path, 0.2: 20 % worse), finite
//!   and not negative; every tree has one or none does. Averaged over the trees in tree order,
//!   as probabilities are ([`Model::expected_costs_into`]).
//! - `"handover_cost": {"default": X, "pairs": {"bbr>cubic": Y, ...}}`: the measured relative
//!   cost of handing a flow over from one class to another (`FROM>TO`, both classes), finite
//!   and not negative; a pair not listed costs `default` (absent: 0). The selector hands a
//!   flow over only when the expected gain (by the trees' costs) exceeds it; without costs in
//!   the trees it is only reported.
//!
//! Each tree is scikit-learn's `tree_` arrays: node `i` is a leaf when `children_left[i] == -1`,
//! otherwise a sample goes to `children_left[i]` when its feature `feature[i]` (a position in
//! `features`) is at most `threshold[i]`, else to `children_right[i]`; `value[i]` holds the
//! node's class probabilities (scikit-learn 1.4 and later store fractions that sum to 1; `kind`
//! is "forest", or "tree" for a single decision tree). What scikit-learn does, and so this
//! evaluator:
//!
//! - the input is cast to `f32` (`check_array(X, dtype=np.float32)`), then each comparison is
//!   made in `f64` against the `f64` threshold;
//! - a tree's probabilities are its leaf's `value` as stored
//!   (`DecisionTreeClassifier.predict_proba`);
//! - a forest's probabilities are the sum of its trees', added in tree order, divided by the
//!   number of trees (`RandomForestClassifier.predict_proba`); the class is the first maximum
//!   (`np.argmax`).
//!
//! Done in the same order with the same operations, the probabilities are the same `f64`s as
//! scikit-learn's and the labels are identical.
//!
//! Everything is checked at load time, and every problem is named with the file: the format and
//! version, unknown fields, unknown or repeated feature names, classes that are not simple-API
//! algorithms, and trees whose arrays disagree in length, point outside the tree or backwards
//! (scikit-learn numbers children after their parent, which also rules out cycles), name
//! features the model lacks, or carry non-finite numbers; objectives, costs and handover costs
//! that do not parse, do not fit the classes and trees, or are negative or not finite. A loaded model cannot fail or loop
//! when it is evaluated, and evaluating it allocates nothing.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::features::{FeatureWindow, Features};
use crate::objective::Objective;

/// The `format` of a model file.
pub const FORMAT: &str = "ccswitch-model";
/// The file format version this code reads.
pub const VERSION: u64 = 1;
/// The most classes a model may have (probabilities are summed in a buffer on the stack).
pub const MAX_CLASSES: usize = 64;
/// How far a node's class probabilities may sum from 1.
const SUM_TOLERANCE: f64 = 1e-6;
/// The most nodes over all trees (node positions are `u32`; this is far above any useful model).
pub const MAX_NODES: usize = 1 << 26;
/// At most this many problems are listed in one error.
const MAX_PROBLEMS_SHOWN: usize = 20;

/// A model file that cannot be used: which file, and everything wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// The file (or a description of where the text came from).
    pub origin: String,
    pub problems: Vec<String>,
}

impl ModelError {
    fn one(origin: &str, problem: String) -> Self {
        Self { origin: origin.to_string(), problems: vec![problem] }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "model {}: ", self.origin)?;
        match self.problems.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} problems:", many.len())?;
                for p in many.iter().take(MAX_PROBLEMS_SHOWN) {
                    write!(f, "\n  - {p}")?;
                }
                if many.len() > MAX_PROBLEMS_SHOWN {
                    write!(f, "\n  - ... and {} more", many.len() - MAX_PROBLEMS_SHOWN)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ModelError {}

// ---- The file as written -------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    #[allow(dead_code)] // checked before, on the raw JSON
    format: String,
    #[allow(dead_code)]
    version: u64,
    kind: String,
    name: String,
    features: Vec<String>,
    classes: Vec<String>,
    window: ModelWindowFile,
    decide: ModelDecideFile,
    trees: Vec<TreeFile>,
    /// Free-form: where the model came from (library versions, dataset, date).
    #[serde(default)]
    provenance: serde_json::Value,
    /// An objective spec; absent: `tct`.
    #[serde(default)]
    objective: Option<String>,
    #[serde(default)]
    handover_cost: Option<HandoverCostFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HandoverCostFile {
    #[serde(default)]
    default: f64,
    /// `"FROM>TO"`: cost.
    #[serde(default)]
    pairs: std::collections::BTreeMap<String, f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelWindowFile {
    kind: String,
    samples: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelDecideFile {
    min_samples: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeFile {
    children_left: Vec<i64>,
    children_right: Vec<i64>,
    feature: Vec<i64>,
    threshold: Vec<f64>,
    value: Vec<Vec<f64>>,
    /// Parallel to `value`: each class's expected relative regret at the node.
    #[serde(default)]
    cost: Option<Vec<Vec<f64>>>,
}

// ---- The model as loaded -------------------------------------------------------------------

/// `Node::column` of a leaf.
const LEAF: u32 = u32::MAX;

/// One node of one tree; the nodes of all trees share one array.
#[derive(Clone, Copy, Debug)]
struct Node {
    threshold: f64,
    /// Position in the model's features, or [`LEAF`].
    column: u32,
    /// Inner node: the children's positions. Leaf: `left` is the position of its class
    /// probabilities in `Model::values`.
    left: u32,
    right: u32,
}

/// A loaded, checked model.
#[derive(Clone, Debug)]
pub struct Model {
    name: String,
    origin: String,
    /// Each column's position in [`Features::NAMES`].
    columns: Vec<usize>,
    classes: Vec<String>,
    window: FeatureWindow,
    min_samples: usize,
    /// Position of each tree's root in `nodes`.
    roots: Vec<u32>,
    nodes: Vec<Node>,
    /// Every leaf's class probabilities, `classes.len()` each.
    values: Vec<f64>,
    /// Every leaf's expected relative regret per class, at the same positions as `values`;
    /// empty when the model has no costs.
    costs: Vec<f64>,
    /// The relative cost of a handover, `classes.len()` squared, from-major (`from * n + to`);
    /// empty when the file gives none (every handover then costs 0).
    handover_costs: Vec<f64>,
    objective: Objective,
    max_depth: usize,
    provenance: serde_json::Value,
}

impl Model {
    /// Read and check a model file.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::one(&origin, format!("cannot read it: {e}")))?;
        Self::parse(&text, &origin)
    }

    /// Check a model from its JSON text; `origin` (the file) names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Model, ModelError> {
        let fail = |problem: String| ModelError::one(origin, problem);
        let raw: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| fail(format!("not valid JSON ({e}); is the file truncated or corrupt?")))?;
        let Some(object) = raw.as_object() else {
            return Err(fail(format!("not a ccswitch model: expected a JSON object with \"format\": \"{FORMAT}\"")));
        };
        match object.get("format") {
            Some(serde_json::Value::String(f)) if f == FORMAT => {}
            Some(other) => return Err(fail(format!("\"format\" is {other}, not \"{FORMAT}\": not a ccswitch model file"))),
            None => return Err(fail(format!("no \"format\": not a ccswitch model file (expected \"format\": \"{FORMAT}\")"))),
        }
        match object.get("version") {
            Some(v) if v.as_u64() == Some(VERSION) => {}
            Some(v) => {
                return Err(fail(format!(
                    "format version {v} is not supported: this agent reads version {VERSION} (export the model again, or use an agent that reads version {v})"
                )))
            }
            None => return Err(fail(format!("no \"version\" (this agent reads version {VERSION})"))),
        }
        let file: ModelFile = serde_json::from_str(text).map_err(|e| fail(format!("{e}")))?;
        build(file).map_err(|problems| ModelError { origin: origin.to_string(), problems })
            .map(|mut m| {
                m.origin = origin.to_string();
                m
            })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file the model was loaded from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The model's input columns, names from [`Features::NAMES`].
    pub fn feature_names(&self) -> impl ExactSizeIterator<Item = &'static str> + '_ {
        self.columns.iter().map(|&i| Features::NAMES[i])
    }

    /// The algorithm specs the model chooses from, in the order of its probabilities.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The feature window the model was trained on.
    pub fn window(&self) -> FeatureWindow {
        self.window
    }

    /// The samples in the window at the decision the model was trained on.
    pub fn min_samples(&self) -> usize {
        self.min_samples
    }

    pub fn trees(&self) -> usize {
        self.roots.len()
    }

    /// Nodes over all trees.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The deepest leaf's depth (a tree of a single leaf has depth 0).
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    pub fn provenance(&self) -> &serde_json::Value {
        &self.provenance
    }

    /// What the model was trained for (`tct` for files without an objective).
    pub fn objective(&self) -> &Objective {
        &self.objective
    }

    /// Whether the trees carry expected costs per class (and so handovers can be gain-gated).
    pub fn has_costs(&self) -> bool {
        !self.costs.is_empty()
    }

    /// The relative cost of handing a flow over from class `from` to class `to` (positions in
    /// [`classes`](Self::classes)): the file's pair, else its default, else 0.
    pub fn handover_cost(&self, from: usize, to: usize) -> f64 {
        let n = self.classes.len();
        assert!(from < n && to < n, "model {} has {n} classes", self.origin);
        self.handover_costs.get(from * n + to).copied().unwrap_or(0.0)
    }

    /// Class probabilities for one input (`x` in the order of [`feature_names`](Self::feature_names))
    /// written into `proba` (one per class); returns the predicted class, the first maximum.
    /// Panics if the lengths differ from the model's.
    pub fn predict_into(&self, x: &[f64], proba: &mut [f64]) -> usize {
        assert_eq!(x.len(), self.columns.len(), "model {} takes {} features", self.origin, self.columns.len());
        assert_eq!(proba.len(), self.classes.len(), "model {} has {} classes", self.origin, self.classes.len());
        self.mean_over_leaves(&self.values, x, proba);
        first_maximum(proba)
    }

    /// Each class's expected relative regret for one input (the mean of the trees' leaf costs,
    /// added in tree order) written into `costs`, without allocating; `false` (and `costs`
    /// untouched) when the model has no costs. Panics if the lengths differ from the model's.
    pub fn expected_costs_into(&self, x: &[f64], costs: &mut [f64]) -> bool {
        assert_eq!(x.len(), self.columns.len(), "model {} takes {} features", self.origin, self.columns.len());
        assert_eq!(costs.len(), self.classes.len(), "model {} has {} classes", self.origin, self.classes.len());
        if !self.has_costs() {
            return false;
        }
        self.mean_over_leaves(&self.costs, x, costs);
        true
    }

    /// [`expected_costs_into`](Self::expected_costs_into) for a flow's features.
    pub fn expected_costs(&self, features: &Features, costs: &mut [f64]) -> bool {
        let x = self.columns_of(features);
        self.expected_costs_into(&x[..self.columns.len()], costs)
    }

    /// The mean over trees of the rows of `table` (`values` or `costs`) at the leaves `x`
    /// reaches, summed in tree order then divided, as scikit-learn averages probabilities.
    fn mean_over_leaves(&self, table: &[f64], x: &[f64], out: &mut [f64]) {
        let mut x32 = [0f32; Features::NAMES.len()];
        for (to, &from) in x32.iter_mut().zip(x) {
            *to = from as f32;
        }
        out.fill(0.0);
        let k = out.len();
        for &root in &self.roots {
            let leaf = self.leaf(root, &x32);
            for (p, v) in out.iter_mut().zip(&table[leaf..leaf + k]) {
                *p += v;
            }
        }
        let trees = self.roots.len() as f64;
        for p in out.iter_mut() {
            *p /= trees;
        }
    }

    /// The model's input columns of `features`, in a buffer of the largest size.
    fn columns_of(&self, features: &Features) -> [f64; Features::NAMES.len()] {
        let mut x = [0f64; Features::NAMES.len()];
        for (to, &column) in x.iter_mut().zip(&self.columns) {
            *to = features.at(column);
        }
        x
    }

    /// Class probabilities and the predicted class for one input (see [`predict_into`](Self::predict_into)).
    pub fn predict(&self, x: &[f64]) -> (usize, Vec<f64>) {
        let mut proba = vec![0.0; self.classes.len()];
        let class = self.predict_into(x, &mut proba);
        (class, proba)
    }

    /// The class the model chooses for a flow's features and its probability, without
    /// allocating.
    pub fn choose(&self, features: &Features) -> (usize, f64) {
        let x = self.columns_of(features);
        let mut proba = [0f64; MAX_CLASSES];
        let proba = &mut proba[..self.classes.len()];
        let class = self.predict_into(&x[..self.columns.len()], proba);
        (class, proba[class])
    }

    /// The position in `values` of the leaf `x` reaches from the tree rooted at `root`.
    fn leaf(&self, root: u32, x: &[f32]) -> usize {
        let mut node = self.nodes[root as usize];
        while node.column != LEAF {
            let next = if f64::from(x[node.column as usize]) <= node.threshold { node.left } else { node.right };
            node = self.nodes[next as usize];
        }
        node.left as usize
    }
}

fn first_maximum(xs: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate().skip(1) {
        if x > xs[best] {
            best = i;
        }
    }
    best
}

/// Check everything; every problem found is listed.
fn build(file: ModelFile) -> Result<Model, Vec<String>> {
    let mut problems = Vec::new();
    match file.kind.as_str() {
        "forest" => {}
        "tree" if file.trees.len() == 1 => {}
        "tree" => problems.push(format!("kind = \"tree\" with {} trees: a tree model has exactly one", file.trees.len())),
        other => problems.push(format!("kind = {other:?}: this agent evaluates \"forest\" and \"tree\" models")),
    }
    if file.name.trim().is_empty() {
        problems.push("name is empty".to_string());
    }

    let mut columns = Vec::with_capacity(file.features.len());
    if file.features.is_empty() {
        problems.push("features is empty: a model needs at least one input".to_string());
    }
    for (j, name) in file.features.iter().enumerate() {
        match Features::index_of(name) {
            None => problems.push(format!("features[{j}] = {name:?}: unknown feature; known: {}", Features::NAMES.join(", "))),
            Some(i) if columns.contains(&i) => problems.push(format!("features[{j}] = {name:?}: repeated")),
            Some(i) => columns.push(i),
        }
    }

    if file.classes.is_empty() {
        problems.push("classes is empty: a model needs at least one algorithm to choose".to_string());
    }
    if file.classes.len() > MAX_CLASSES {
        problems.push(format!("{} classes: at most {MAX_CLASSES}", file.classes.len()));
    }
    for (c, spec) in file.classes.iter().enumerate() {
        if file.classes[..c].contains(spec) {
            problems.push(format!("classes[{c}] = {spec:?}: repeated"));
        } else if let Err(e) = crate::check_algorithm(spec) {
            problems.push(format!("classes[{c}] = {spec:?}: {e}"));
        }
    }

    let window = FeatureWindow::from_kind(&file.window.kind, file.window.samples)
        .map_err(|e| problems.push(format!("window: {e}")))
        .ok();
    if let Some(w) = window {
        if !(1..=w.samples()).contains(&file.decide.min_samples) {
            problems.push(format!(
                "decide: min_samples = {}: must be between 1 and the window's samples ({})",
                file.decide.min_samples,
                w.samples()
            ));
        }
    }

    let objective = match file.objective.as_deref() {
        None => Some(Objective::default()),
        Some(spec) => Objective::parse(spec).map_err(|e| problems.push(format!("objective = {spec:?}: {e}"))).ok(),
    };

    if file.trees.is_empty() {
        problems.push("trees is empty: a forest needs at least one tree".to_string());
    }
    let without_cost: Vec<String> =
        file.trees.iter().enumerate().filter(|(_, t)| t.cost.is_none()).map(|(t, _)| t.to_string()).collect();
    if !without_cost.is_empty() && without_cost.len() < file.trees.len() {
        let (trees, have) = if without_cost.len() == 1 { ("tree", "has") } else { ("trees", "have") };
        problems.push(format!(
            "{trees} {} {have} no cost but the others have: every tree has a cost or none does",
            without_cost.join(", ")
        ));
    }
    // Handover costs without costs in the trees are kept (and reported) but gate nothing: the
    // gate compares the trees' expected costs. Costs without handover costs: a handover costs
    // nothing, any expected gain is enough.
    let handover_costs = match &file.handover_cost {
        Some(h) => check_handover_costs(h, &file.classes).map_err(|e| problems.extend(e)).unwrap_or_default(),
        None => Vec::new(),
    };
    let total: usize = file.trees.iter().map(|t| t.children_left.len()).sum();
    if total > MAX_NODES {
        problems.push(format!("{total} nodes over all trees: at most {MAX_NODES}"));
    }
    let mut nodes = Vec::with_capacity(total);
    let mut values = Vec::new();
    let mut costs = Vec::new();
    let mut roots = Vec::with_capacity(file.trees.len());
    let mut max_depth = 0;
    let n_features = file.features.len();
    let n_classes = file.classes.len();
    if total <= MAX_NODES {
        for (t, tree) in file.trees.iter().enumerate() {
            match check_tree(tree, n_features, n_classes) {
                Ok(depth) => {
                    roots.push(nodes.len() as u32);
                    max_depth = max_depth.max(depth);
                    add_tree(tree, n_classes, &mut nodes, &mut values, &mut costs);
                }
                Err(e) => problems.extend(e.into_iter().map(|p| format!("tree {t}: {p}"))),
            }
        }
    }

    match (window, objective) {
        (Some(window), Some(objective)) if problems.is_empty() => Ok(Model {
            name: file.name,
            origin: String::new(),
            columns,
            classes: file.classes,
            window,
            min_samples: file.decide.min_samples,
            roots,
            nodes,
            values,
            costs,
            handover_costs,
            objective,
            max_depth,
            provenance: file.provenance,
        }),
        _ => Err(problems),
    }
}

/// The handover costs as a from-major matrix over the classes (a pair's cost, else the
/// default); every problem if something is wrong.
fn check_handover_costs(h: &HandoverCostFile, classes: &[String]) -> Result<Vec<f64>, Vec<String>> {
    let mut problems = Vec::new();
    let valid = |x: f64| x.is_finite() && x >= 0.0;
    if !valid(h.default) {
        problems.push(format!("handover_cost: default = {}: a relative cost is finite and not negative", h.default));
    }
    let n = classes.len();
    let mut matrix = vec![h.default; n * n];
    for c in 0..n {
        matrix[c * n + c] = 0.0;
    }
    let class = |name: &str| classes.iter().position(|c| c == name);
    for (pair, &cost) in &h.pairs {
        let Some((from, to)) = pair.split_once('>') else {
            problems.push(format!("handover_cost: pairs[{pair:?}]: expected \"FROM>TO\", two of the classes ({})", classes.join(", ")));
            continue;
        };
        if !valid(cost) {
            problems.push(format!("handover_cost: pairs[{pair:?}] = {cost}: a relative cost is finite and not negative"));
        }
        match (class(from), class(to)) {
            (Some(f), Some(t)) if f == t => {
                problems.push(format!("handover_cost: pairs[{pair:?}]: a flow is not handed over to the class it runs"))
            }
            (Some(f), Some(t)) => matrix[f * n + t] = cost,
            _ => {
                for name in [from, to].into_iter().filter(|name| class(name).is_none()) {
                    problems.push(format!(
                        "handover_cost: pairs[{pair:?}]: {name:?} is not one of the classes ({})",
                        classes.join(", ")
                    ));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(matrix)
    } else {
        Err(problems)
    }
}

/// What is wrong with one tree; its depth if nothing.
fn check_tree(tree: &TreeFile, n_features: usize, n_classes: usize) -> Result<usize, Vec<String>> {
    let n = tree.children_left.len();
    let mut problems = Vec::new();
    if n == 0 {
        return Err(vec!["no nodes".to_string()]);
    }
    for (what, len) in [
        ("children_right", tree.children_right.len()),
        ("feature", tree.feature.len()),
        ("threshold", tree.threshold.len()),
        ("value", tree.value.len()),
    ] {
        if len != n {
            problems.push(format!("{what} has {len} entries, children_left {n}: the arrays must describe the same nodes"));
        }
    }
    if let Some(cost) = tree.cost.as_ref().filter(|c| c.len() != n) {
        problems.push(format!("cost has {} entries, children_left {n}: the arrays must describe the same nodes", cost.len()));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut depth = vec![0usize; n];
    for i in 0..n {
        let (left, right) = (tree.children_left[i], tree.children_right[i]);
        let row = &tree.value[i];
        if row.len() != n_classes {
            problems.push(format!("node {i}: value has {} entries for {n_classes} classes", row.len()));
        } else if let Some(v) = row.iter().find(|v| !v.is_finite() || **v < 0.0) {
            problems.push(format!("node {i}: value holds {v}; class probabilities are finite and not negative"));
        } else if (row.iter().sum::<f64>() - 1.0).abs() > SUM_TOLERANCE {
            problems.push(format!(
                "node {i}: value sums to {}, not 1: expected class probabilities (tree_.value of scikit-learn 1.4 or later)",
                row.iter().sum::<f64>()
            ));
        }
        match tree.cost.as_ref().map(|c| &c[i]) {
            Some(row) if row.len() != n_classes => {
                problems.push(format!("node {i}: cost has {} entries for {n_classes} classes", row.len()))
            }
            Some(row) => {
                if let Some(v) = row.iter().find(|v| !v.is_finite() || **v < 0.0) {
                    problems.push(format!("node {i}: cost holds {v}; expected relative regrets are finite and not negative"));
                }
            }
            None => {}
        }
        if left == -1 {
            if right != -1 {
                problems.push(format!("node {i}: children_left is -1 (a leaf) but children_right is {right}"));
            }
            continue;
        }
        for (side, child) in [("children_left", left), ("children_right", right)] {
            if child <= i as i64 || child >= n as i64 {
                problems.push(format!(
                    "node {i}: {side} = {child}: must be -1 (a leaf) or a later node of the tree (between {} and {})",
                    i + 1,
                    n - 1
                ));
            } else {
                depth[child as usize] = depth[i] + 1;
            }
        }
        let feature = tree.feature[i];
        if feature < 0 || feature >= n_features as i64 {
            problems.push(format!("node {i}: feature = {feature}: the model has {n_features} features (0 to {})", n_features.saturating_sub(1)));
        }
        if !tree.threshold[i].is_finite() {
            problems.push(format!("node {i}: threshold = {}: not a finite number", tree.threshold[i]));
        }
    }
    if problems.is_empty() {
        Ok(depth.into_iter().max().unwrap_or(0))
    } else {
        Err(problems)
    }
}

/// Append a checked tree's nodes (children renumbered into the shared array) and its leaves'
/// probabilities, as stored (`predict_proba` returns them unchanged), and their costs if the
/// tree has them (at the same positions as the probabilities).
fn add_tree(tree: &TreeFile, n_classes: usize, nodes: &mut Vec<Node>, values: &mut Vec<f64>, costs: &mut Vec<f64>) {
    let offset = nodes.len() as u32;
    for i in 0..tree.children_left.len() {
        if tree.children_left[i] == -1 {
            let at = values.len() as u32;
            let row = &tree.value[i];
            debug_assert_eq!(row.len(), n_classes);
            values.extend_from_slice(row);
            if let Some(cost) = &tree.cost {
                costs.extend_from_slice(&cost[i]);
            }
            nodes.push(Node { threshold: 0.0, column: LEAF, left: at, right: 0 });
        } else {
            nodes.push(Node {
                threshold: tree.threshold[i],
                column: tree.feature[i] as u32,
                left: offset + tree.children_left[i] as u32,
                right: offset + tree.children_right[i] as u32,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two trees over (min_rtt_ms, loss_rate) choosing among bbr, cubic, hybla.
    const TWO_TREES: &str = r#"{
        "format": "ccswitch-model", "version": 1, "kind": "forest", "name": "t",
        "features": ["min_rtt_ms", "loss_rate"],
        "classes": ["bbr", "cubic", "hybla"],
        "window": {"kind": "first", "samples": 20},
        "decide": {"min_samples": 8},
        "trees": [
            {"children_left": [1, -1, 3, -1, -1], "children_right": [2, -1, 4, -1, -1],
             "feature": [0, -2, 1, -2, -2], "threshold": [50.0, -2.0, 0.01, -2.0, -2.0],
             "value": [[0.3, 0.3, 0.4], [0, 0, 1], [0.5, 0.5, 0], [0, 1, 0], [1, 0, 0]]},
            {"children_left": [1, -1, -1], "children_right": [2, -1, -1],
             "feature": [1, -2, -2], "threshold": [0.01, -2.0, -2.0],
             "value": [[0.5, 0.25, 0.25], [0, 0.5, 0.5], [0.75, 0.25, 0]]}
        ],
        "provenance": {"sklearn": "1.9.1"}
    }"#;

    fn model() -> Model {
        Model::parse(TWO_TREES, "two.json").unwrap()
    }

    fn error_of(from: &str, to: &str) -> String {
        let text = TWO_TREES.replacen(from, to, 1);
        assert_ne!(text, TWO_TREES, "{from:?} not in the model");
        match Model::parse(&text, "bad.json") {
            Ok(m) => panic!("loaded {m:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_model_loads_with_its_window_classes_and_features() {
        let m = model();
        assert_eq!((m.name(), m.origin(), m.trees(), m.nodes(), m.max_depth()), ("t", "two.json", 2, 8, 2));
        assert_eq!(m.feature_names().collect::<Vec<_>>(), ["min_rtt_ms", "loss_rate"]);
        assert_eq!(m.classes(), ["bbr", "cubic", "hybla"]);
        assert_eq!((m.window(), m.min_samples()), (FeatureWindow::FirstSamples(20), 8));
        assert_eq!(m.provenance()["sklearn"], "1.9.1");
    }

    #[test]
    fn probabilities_are_the_mean_of_the_trees_leaves() {
        let m = model();
        // Short RTT: tree 0 says hybla; no loss: tree 1 says 0.5 cubic, 0.5 hybla.
        assert_eq!(m.predict(&[20.0, 0.0]), (2, vec![0.0, 0.25, 0.75]));
        // Long RTT with loss: tree 0 says bbr; tree 1 says 0.75 bbr, 0.25 cubic.
        assert_eq!(m.predict(&[80.0, 0.5]), (0, vec![0.875, 0.125, 0.0]));
        // Long RTT without loss: cubic 0.5 + 0.5, hybla 0.5, over two trees.
        assert_eq!(m.predict(&[80.0, 0.0]), (1, vec![0.0, 0.75, 0.25]));
    }

    #[test]
    fn features_are_cast_to_f32_before_the_comparison() {
        // 0.010000000001 is above the threshold 0.01 as an f64, but its nearest f32 is below
        // it: scikit-learn, and so the model, send it left (cubic), not right (bbr).
        let m = model();
        let x = 0.010000000001f64;
        assert!(x > 0.01 && f64::from(x as f32) <= 0.01);
        assert_eq!(m.predict(&[80.0, x]), (1, vec![0.0, 0.75, 0.25]));
        assert_eq!(m.predict(&[80.0, 0.0101]).0, 0);
    }

    #[test]
    fn thresholds_are_read_to_the_exact_f64_that_was_written() {
        // Shortest round-trip decimals of random f64s: serde_json's default parser is off by a
        // unit in the last place for some of them, which sends inputs on a threshold the wrong way.
        let mut rng = ccswitch_algorithms::xorshift::XorShift64::new(0x2545_f491_4f6c_dd1d);
        for _ in 0..3_000 {
            let x = rng.next_u64();
            let t = f64::from_bits(0x3f00_0000_0000_0000 | (x & 0x00ff_ffff_ffff_ffff));
            let text = TWO_TREES.replacen("50.0", &format!("{t:?}"), 1);
            let m = Model::parse(&text, "t.json").unwrap();
            assert_eq!(m.nodes[0].threshold.to_bits(), t.to_bits(), "{t:?} read as {:?}", m.nodes[0].threshold);
        }
    }

    #[test]
    fn ties_go_to_the_first_class() {
        let m = Model::parse(&TWO_TREES.replace("[0.75, 0.25, 0]", "[0.5, 0.5, 0]").replace("[1, 0, 0]]}", "[0.5, 0.5, 0]]}"), "tie.json").unwrap();
        let (class, proba) = m.predict(&[80.0, 0.5]);
        assert_eq!(proba, [0.5, 0.5, 0.0]);
        assert_eq!(class, 0);
    }

    #[test]
    fn choosing_from_features_reads_the_models_columns() {
        let m = model();
        let f = Features { min_rtt_ms: 20.0, loss_rate: 0.0, mean_rtt_ms: 900.0, ..Features::default() };
        assert_eq!(m.choose(&f), (2, 0.75));
        let f = Features { min_rtt_ms: 80.0, loss_rate: 0.5, ..Features::default() };
        assert_eq!(m.choose(&f), (0, 0.875));
    }

    #[test]
    fn wrong_format_version_and_broken_json_are_refused_naming_the_file() {
        let e = error_of("\"version\": 1", "\"version\": 2");
        assert!(e.starts_with("model bad.json: format version 2 is not supported: this agent reads version 1"), "{e}");
        let e = error_of("\"format\": \"ccswitch-model\"", "\"format\": \"onnx\"");
        assert!(e.starts_with("model bad.json: \"format\" is \"onnx\", not \"ccswitch-model\""), "{e}");
        let e = Model::parse(&TWO_TREES[..TWO_TREES.len() / 2], "cut.json").unwrap_err().to_string();
        assert!(e.starts_with("model cut.json: not valid JSON (EOF while parsing") && e.contains("truncated"), "{e}");
        let e = Model::parse("[1, 2]", "list.json").unwrap_err().to_string();
        assert!(e.contains("not a ccswitch model"), "{e}");
        let e = Model::load(Path::new("/nonexistent/m.json")).unwrap_err().to_string();
        assert!(e.starts_with("model /nonexistent/m.json: cannot read it: "), "{e}");
    }

    #[test]
    fn unknown_features_classes_and_fields_are_refused() {
        let e = error_of("\"loss_rate\"]", "\"loss_ratio\"]");
        assert!(e.contains("features[1] = \"loss_ratio\": unknown feature; known: min_rtt_ms"), "{e}");
        let e = error_of("\"hybla\"]", "\"hyblaa\"]");
        assert!(e.contains("classes[2] = \"hyblaa\": unknown algorithm"), "{e}");
        let e = error_of("\"hybla\"]", "\"reno-datapath\"]");
        assert!(e.contains("classes[2] = \"reno-datapath\": reno-datapath brings its own datapath program"), "{e}");
        let e = error_of("\"hybla\"]", "\"bbr\"]");
        assert!(e.contains("classes[2] = \"bbr\": repeated"), "{e}");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"forest\", \"colour\": 1");
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"boosting\"");
        assert!(e.contains("kind = \"boosting\""), "{e}");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"tree\"");
        assert!(e.contains("kind = \"tree\" with 2 trees: a tree model has exactly one"), "{e}");
        let e = error_of("\"kind\": \"first\"", "\"kind\": \"rolling\"");
        assert!(e.contains("window: kind = \"rolling\""), "{e}");
        let e = error_of("\"min_samples\": 8", "\"min_samples\": 21");
        assert!(e.contains("min_samples = 21: must be between 1 and the window's samples (20)"), "{e}");
    }

    #[test]
    fn trees_that_point_backwards_outside_or_past_the_features_are_refused() {
        let e = error_of("\"children_left\": [1, -1, -1]", "\"children_left\": [0, -1, -1]");
        assert!(e.contains("tree 1: node 0: children_left = 0: must be -1 (a leaf) or a later node"), "{e}");
        let e = error_of("\"children_right\": [2, -1, -1]", "\"children_right\": [7, -1, -1]");
        assert!(e.contains("tree 1: node 0: children_right = 7"), "{e}");
        let e = error_of("\"feature\": [1, -2, -2]", "\"feature\": [2, -2, -2]");
        assert!(e.contains("tree 1: node 0: feature = 2: the model has 2 features"), "{e}");
        let e = error_of("\"threshold\": [0.01, -2.0, -2.0]", "\"threshold\": [0.01, -2.0]");
        assert!(e.contains("tree 1: threshold has 2 entries, children_left 3"), "{e}");
        let e = error_of("[0, 0.5, 0.5]", "[0, 0.5]");
        assert!(e.contains("tree 1: node 1: value has 2 entries for 3 classes"), "{e}");
        let e = error_of("[0, 0.5, 0.5]", "[0, 3, 1]");
        assert!(e.contains("tree 1: node 1: value sums to 4, not 1: expected class probabilities"), "{e}");
        let e = error_of("[0, 0.5, 0.5]", "[0, -0.5, 0.5]");
        assert!(e.contains("tree 1: node 1: value holds -0.5"), "{e}");
        let e = error_of("\"trees\": [", "\"trees\": [], \"x\": [");
        assert!(e.contains("unknown field `x`"), "{e}");
    }

    /// TWO_TREES with a cost per node and class, and handover costs.
    fn with_costs() -> String {
        TWO_TREES
            .replacen(
                "[0, 1, 0], [1, 0, 0]]}",
                "[0, 1, 0], [1, 0, 0]],\n             \"cost\": [[0.1, 0.1, 0.1], [0.4, 0.2, 0], [0, 0, 0], [0.3, 0, 0.6], [0, 0.5, 0.2]]}",
                1,
            )
            .replacen(
                "[0.75, 0.25, 0]]}",
                "[0.75, 0.25, 0]],\n             \"cost\": [[0, 0, 0], [0.2, 0, 0.1], [0, 0.1, 0.9]]}",
                1,
            )
            .replacen(
                "\"provenance\"",
                "\"handover_cost\": {\"default\": 0.05, \"pairs\": {\"bbr>cubic\": 0.02, \"hybla>bbr\": 0.3}},\n        \"provenance\"",
                1,
            )
    }

    fn costs_error_of(from: &str, to: &str) -> String {
        let base = with_costs();
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{from:?} not in the model");
        match Model::parse(&text, "bad.json") {
            Ok(m) => panic!("loaded {m:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_model_without_an_objective_was_trained_for_tct() {
        let m = model();
        assert_eq!(m.objective(), &Objective::default());
        assert_eq!(m.objective().to_string(), "tct");
        assert!(!m.has_costs());
        let mut costs = [7.0; 3];
        assert!(!m.expected_costs_into(&[20.0, 0.0], &mut costs));
        assert_eq!(costs, [7.0; 3], "untouched");
        assert_eq!(m.handover_cost(0, 1), 0.0);
    }

    #[test]
    fn a_model_carries_its_objective_in_canonical_form() {
        let text = TWO_TREES.replacen("\"kind\": \"forest\"", "\"kind\": \"forest\", \"objective\": \"weighted:tct=1,harm=1.0,power=0\"", 1);
        let m = Model::parse(&text, "w.json").unwrap();
        assert_eq!(m.objective().to_string(), "weighted:harm=1,tct=1");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"forest\", \"objective\": \"speed\"");
        assert!(e.starts_with("model bad.json: objective = \"speed\": unknown objective 'speed': the built-ins are tct, power, tct_delay_budget, harm, weighted"), "{e}");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"forest\", \"objective\": \"weighted:power=-1\"");
        assert!(e.contains("objective = \"weighted:power=-1\": weighted: weight power = -1 is negative; weights must be >= 0"), "{e}");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"forest\", \"objective\": \"tct_delay_budget:budget_ms=0\"");
        assert!(e.contains("tct_delay_budget: budget_ms = 0 must be > 0"), "{e}");
        let e = error_of("\"kind\": \"forest\"", "\"kind\": \"forest\", \"objective\": 3");
        assert!(e.contains("invalid type: integer `3`, expected a string"), "{e}");
    }

    #[test]
    fn expected_costs_are_the_mean_of_the_trees_leaf_costs() {
        let m = Model::parse(&with_costs(), "c.json").unwrap();
        assert!(m.has_costs());
        let mut costs = [0.0; 3];
        // Tree 0 reaches node 1, tree 1 node 1; summed in tree order, then divided.
        assert!(m.expected_costs_into(&[20.0, 0.0], &mut costs));
        assert_eq!(costs, [(0.4 + 0.2) / 2.0, (0.2 + 0.0) / 2.0, (0.0 + 0.1) / 2.0]);
        // Tree 0 reaches node 4, tree 1 node 2.
        assert!(m.expected_costs_into(&[80.0, 0.5], &mut costs));
        assert_eq!(costs, [0.0, (0.5 + 0.1) / 2.0, (0.2 + 0.9) / 2.0]);
        let f = Features { min_rtt_ms: 80.0, loss_rate: 0.5, ..Features::default() };
        let mut from_features = [0.0; 3];
        assert!(m.expected_costs(&f, &mut from_features));
        assert_eq!(from_features, costs);
        // Probabilities are unchanged by the costs.
        assert_eq!(m.predict(&[20.0, 0.0]), model().predict(&[20.0, 0.0]));
    }

    #[test]
    fn handover_costs_are_the_pair_else_the_default_else_zero() {
        let m = Model::parse(&with_costs(), "c.json").unwrap();
        // classes: bbr 0, cubic 1, hybla 2.
        assert_eq!(m.handover_cost(0, 1), 0.02);
        assert_eq!(m.handover_cost(2, 0), 0.3);
        assert_eq!(m.handover_cost(1, 0), 0.05, "not listed: the default");
        let text = with_costs().replacen("\"default\": 0.05, ", "", 1);
        assert_eq!(Model::parse(&text, "c.json").unwrap().handover_cost(1, 0), 0.0, "no default: 0");
        let start = with_costs().find("\"handover_cost\"").unwrap();
        let end = with_costs().find("\"provenance\"").unwrap();
        let text = with_costs().replace(&with_costs()[start..end], "");
        let m = Model::parse(&text, "c.json").unwrap();
        assert!(m.has_costs());
        assert_eq!(m.handover_cost(2, 0), 0.0, "no handover_cost: 0");
    }

    #[test]
    fn costs_that_do_not_fit_the_tree_or_are_negative_are_refused() {
        let e = costs_error_of("[0.2, 0, 0.1], ", "");
        assert!(e.contains("tree 1: cost has 2 entries, children_left 3: the arrays must describe the same nodes"), "{e}");
        let e = costs_error_of("[0.2, 0, 0.1]", "[0.2, 0]");
        assert!(e.contains("tree 1: node 1: cost has 2 entries for 3 classes"), "{e}");
        let e = costs_error_of("[0.2, 0, 0.1]", "[0.2, -0.1, 0.1]");
        assert!(e.contains("tree 1: node 1: cost holds -0.1; expected relative regrets are finite and not negative"), "{e}");
        let e = costs_error_of("[0.2, 0, 0.1]", "[0.2, 1e999, 0.1]");
        assert!(e.starts_with("model bad.json: not valid JSON (number out of range"), "{e}");
        let e = costs_error_of(",\n             \"cost\": [[0, 0, 0], [0.2, 0, 0.1], [0, 0.1, 0.9]]", "");
        assert!(e.contains("tree 1 has no cost but the others have: every tree has a cost or none does"), "{e}");
    }

    #[test]
    fn handover_costs_naming_unknown_classes_or_negative_are_refused() {
        let e = costs_error_of("\"bbr>cubic\"", "\"bbr>reno\"");
        assert!(e.contains("handover_cost: pairs[\"bbr>reno\"]: \"reno\" is not one of the classes (bbr, cubic, hybla)"), "{e}");
        let e = costs_error_of("\"bbr>cubic\"", "\"bbr-cubic\"");
        assert!(e.contains("handover_cost: pairs[\"bbr-cubic\"]: expected \"FROM>TO\", two of the classes (bbr, cubic, hybla)"), "{e}");
        let e = costs_error_of("\"bbr>cubic\"", "\"bbr>bbr\"");
        assert!(e.contains("pairs[\"bbr>bbr\"]: a flow is not handed over to the class it runs"), "{e}");
        let e = costs_error_of("\"hybla>bbr\": 0.3", "\"hybla>bbr\": -0.3");
        assert!(e.contains("handover_cost: pairs[\"hybla>bbr\"] = -0.3: a relative cost is finite and not negative"), "{e}");
        let e = costs_error_of("\"default\": 0.05", "\"default\": -1");
        assert!(e.contains("handover_cost: default = -1: a relative cost is finite and not negative"), "{e}");
        let e = costs_error_of("\"default\": 0.05", "\"fallback\": 0.05");
        assert!(e.contains("unknown field `fallback`"), "{e}");
        // Without costs in the trees, handover costs load (as the exporter may write them) and
        // are reported, but there is nothing to gate by.
        let text = TWO_TREES.replacen("\"provenance\"", "\"handover_cost\": {\"default\": 0.1}, \"provenance\"", 1);
        let m = Model::parse(&text, "h.json").unwrap();
        assert!(!m.has_costs());
        assert_eq!(m.handover_cost(0, 1), 0.1);
    }

    #[test]
    fn every_problem_is_listed_in_one_error() {
        let text = TWO_TREES.replace("\"loss_rate\"]", "\"loss_ratio\"]").replace("\"hybla\"]", "\"nope\"]").replace("\"samples\": 20", "\"samples\": 0");
        let e = Model::parse(&text, "m.json").unwrap_err();
        assert_eq!(e.problems.len(), 3, "{e}");
        assert!(e.to_string().starts_with("model m.json: 3 problems:\n  - features[1]"), "{e}");
    }
}
