//! The book's reference page of the model file, `book/src/reference/model.md`, is generated from
//! this crate's own definitions of it: the serde shapes `model.toml` is read into (`RawModel` in
//! `src/spec.rs` and every struct and enum its fields reach, in whichever file of `src/` they are
//! declared), read from the source with `syn`. Every table and key, its TOML type, whether it is
//! required, its default, and the `///` doc comment of the field; serde's `rename`, `rename_all`,
//! `alias`, `default` (bare, `= "fn"`, or on the struct), `flatten`, `skip`, `untagged` and
//! `deny_unknown_fields` applied as serde applies them. A key added, renamed or documented in the
//! code changes the page, and this test fails until the page is regenerated with
//! `UPDATE_SNAPSHOTS=1 cargo test -p cqrs-model --test reference`.
//!
//! Checks that the generator reads the shapes right: every model file of the repository that
//! `Model::parse` accepts (the example, the starter's, the lending library's, the fixtures) is
//! valid against the generated description (keys, types, required keys). And a ratchet: the count
//! of keys without a doc comment may shrink, never grow.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use syn::{
    Attribute, Expr, Fields, GenericArgument, Item, Lit, PathArguments, Token, Type, UseTree,
};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const PAGE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../book/src/reference/model.md"
);
const REFRESH: &str = "UPDATE_SNAPSHOTS=1 cargo test -p cqrs-model --test reference";
/// Where the walk starts: the whole file.
const START: (&str, &str) = ("spec", "RawModel");
/// Keys of the model file whose field has no `///` doc comment (listed by this test). New keys
/// come with one: this number may only go down (lower it when a doc comment is added).
const UNDOCUMENTED_AT_MOST: usize = 69;

/// The TOML shape of a Rust type as serde reads it.
#[derive(Clone, Debug, PartialEq)]
enum Shape {
    Str,
    Bool,
    Int,
    Float,
    Any,
    Array(Box<Shape>),
    /// A table whose keys are names the writer chooses (`BTreeMap<String, _>`).
    Map(Box<Shape>),
    /// A table with the keys of a struct: (module, struct).
    Table(String, String),
    /// An untagged enum: any of its variants' shapes.
    OneOf(Vec<Shape>),
    /// An enum of unit variants: one of these strings.
    Values(Vec<String>),
}

struct Key {
    name: String,
    aliases: Vec<String>,
    shape: Shape,
    required: bool,
    default: Option<String>,
    doc: Option<String>,
    /// The doc comment of the field's enum type, if it is one.
    type_doc: Option<String>,
    /// Where it is declared (`spec.rs RawEntity.pk`), for the list of undocumented keys.
    origin: String,
}

struct Table {
    doc: Option<String>,
    keys: Vec<Key>,
    deny_unknown: bool,
}

/// The crate's source: every `src/*.rs` file, parsed, by module name (`lib` for lib.rs).
struct Source {
    files: BTreeMap<String, syn::File>,
}

fn ident_path(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// A type as written, for messages: `BTreeMap<String, RawIndex>`.
fn type_text(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .iter()
            .map(|s| match &s.arguments {
                PathArguments::AngleBracketed(a) => format!(
                    "{}<{}>",
                    s.ident,
                    a.args
                        .iter()
                        .map(|g| match g {
                            GenericArgument::Type(t) => type_text(t),
                            _ => "_".into(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => s.ident.to_string(),
            })
            .collect::<Vec<_>>()
            .join("::"),
        Type::Reference(r) => format!("&{}", type_text(&r.elem)),
        _ => "<unsupported type>".into(),
    }
}

/// The type arguments of a path type's last segment.
fn type_args(ty: &Type) -> Vec<&Type> {
    let Type::Path(p) = ty else { return Vec::new() };
    match &p.path.segments.last().map(|s| &s.arguments) {
        Some(PathArguments::AngleBracketed(a)) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn doc(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(l) => match &l.lit {
                    Lit::Str(s) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_string())
        .collect();
    let text = lines.join("\n").trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// serde's attributes of an item or field: name -> value (`None` for a bare word).
fn serde_attrs(attrs: &[Attribute], at: &str) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            let name = ident_path(&meta.path).join("::");
            if meta.input.peek(Token![=]) {
                let value: syn::LitStr = meta.value()?.parse()?;
                out.insert(name, Some(value.value()));
            } else if meta.input.peek(syn::token::Paren) {
                panic!(
                    "{at}: #[serde({name}(...))] is not read by shared/model/tests/reference.rs: \
                     extend it"
                );
            } else {
                out.insert(name, None);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{at}: #[serde] attribute: {e}"));
    }
    out
}

fn derives(attrs: &[Attribute], name: &str) -> bool {
    let mut found = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("derive")) {
        let _ = attr.parse_nested_meta(|meta| {
            found |= meta.path.segments.last().is_some_and(|s| s.ident == name);
            Ok(())
        });
    }
    found
}

/// serde's `rename_all` applied to a snake_case field or PascalCase variant name.
fn rename_all(rule: Option<&str>, name: &str, variant: bool) -> String {
    let words: Vec<String> = if variant {
        let mut words = Vec::new();
        for c in name.chars() {
            if c.is_uppercase() || words.is_empty() {
                words.push(String::new());
            }
            words.last_mut().unwrap().push(c.to_ascii_lowercase());
        }
        words
    } else {
        name.split('_').map(str::to_string).collect()
    };
    let cap = |w: &String| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    match rule {
        None if variant => name.to_string(),
        None | Some("snake_case") => words.join("_"),
        Some("lowercase") => words.concat(),
        Some("UPPERCASE") => words.concat().to_uppercase(),
        Some("kebab-case") => words.join("-"),
        Some("SCREAMING_SNAKE_CASE") => words.join("_").to_uppercase(),
        Some("SCREAMING-KEBAB-CASE") => words.join("-").to_uppercase(),
        Some("PascalCase") => words.iter().map(cap).collect(),
        Some("camelCase") => {
            let pascal: String = words.iter().map(cap).collect();
            let mut c = pascal.chars();
            c.next()
                .map(|f| f.to_lowercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        }
        Some(other) => panic!("rename_all = {other:?} is not read by the generator: extend it"),
    }
}

/// The one literal of an expression such as `"table".into()` or `Kind("all".into())`, as TOML.
fn literals(expr: &Expr, out: &mut Vec<String>) {
    match expr {
        Expr::Lit(l) => out.push(match &l.lit {
            Lit::Str(s) => format!("{:?}", s.value()),
            Lit::Int(i) => i.base10_digits().to_string(),
            Lit::Float(f) => f.base10_digits().to_string(),
            Lit::Bool(b) => b.value.to_string(),
            _ => "<literal>".into(),
        }),
        Expr::MethodCall(m) => {
            literals(&m.receiver, out);
            m.args.iter().for_each(|a| literals(a, out));
        }
        Expr::Call(c) => c.args.iter().for_each(|a| literals(a, out)),
        Expr::Paren(p) => literals(&p.expr, out),
        Expr::Reference(r) => literals(&r.expr, out),
        Expr::Path(_) => {}
        _ => out.push("<expression>".into()),
    }
}

fn body_literal(block: &syn::Block, at: &str) -> String {
    let [syn::Stmt::Expr(expr, None)] = block.stmts.as_slice() else {
        panic!("{at}: a default that is not one expression: the generator cannot show it");
    };
    let mut found = Vec::new();
    literals(expr, &mut found);
    match found.as_slice() {
        [one] if !one.starts_with('<') => one.clone(),
        _ => panic!("{at}: a default that is not one literal ({found:?}): extend the generator"),
    }
}

fn default_of_scalar(shape: &Shape) -> Option<&'static str> {
    match shape {
        Shape::Str => Some("\"\""),
        Shape::Bool => Some("false"),
        Shape::Int => Some("0"),
        Shape::Float => Some("0.0"),
        Shape::Array(_) => Some("[]"),
        Shape::Map(_) => Some("{}"),
        _ => None,
    }
}

impl Source {
    fn load() -> Self {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(SRC).expect("read src/") {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let module = path.file_stem().unwrap().to_string_lossy().into_owned();
                let file =
                    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.insert(module, file);
            }
        }
        Source { files }
    }

    fn items(&self, module: &str) -> &[Item] {
        &self
            .files
            .get(module)
            .unwrap_or_else(|| panic!("no src/{module}.rs"))
            .items
    }

    fn defines(&self, module: &str, name: &str) -> bool {
        self.items(module).iter().any(|item| match item {
            Item::Struct(s) => s.ident == name,
            Item::Enum(e) => e.ident == name,
            _ => false,
        })
    }

    /// What a name imported by `use` in `module` stands for.
    fn imports(&self, module: &str) -> HashMap<String, Vec<String>> {
        fn walk(prefix: &[String], tree: &UseTree, out: &mut HashMap<String, Vec<String>>) {
            let with = |name: String| {
                let mut path = prefix.to_vec();
                path.push(name);
                path
            };
            match tree {
                UseTree::Path(p) => walk(&with(p.ident.to_string()), &p.tree, out),
                UseTree::Name(n) => {
                    out.insert(n.ident.to_string(), with(n.ident.to_string()));
                }
                UseTree::Rename(r) => {
                    out.insert(r.rename.to_string(), with(r.ident.to_string()));
                }
                UseTree::Group(g) => g.items.iter().for_each(|t| walk(prefix, t, out)),
                UseTree::Glob(_) => {}
            }
        }
        let mut out = HashMap::new();
        for item in self.items(module) {
            if let Item::Use(u) = item {
                walk(&[], &u.tree, &mut out);
            }
        }
        out
    }

    /// A type path of `module` resolved: `Ok((module, name))` for an item of this crate,
    /// `Err(full path)` for anything else (`String`, `toml::Value`, `BTreeMap`).
    fn resolve(&self, module: &str, path: &syn::Path) -> Result<(String, String), String> {
        let mut segs = ident_path(path);
        if segs.len() == 1 {
            if self.defines(module, &segs[0]) {
                return Ok((module.to_string(), segs[0].clone()));
            }
            if let Some(full) = self.imports(module).get(&segs[0]) {
                segs = full.clone();
            }
        }
        match segs.as_slice() {
            [c, m, name] if c == "crate" => Ok((m.clone(), name.clone())),
            [c, name] if c == "crate" => Ok(("lib".into(), name.clone())),
            [s, rest @ ..] if s == "self" && rest.len() == 1 => {
                Ok((module.to_string(), rest[0].clone()))
            }
            _ => Err(segs.join("::")),
        }
    }

    fn shape(&self, module: &str, ty: &Type, at: &str) -> Shape {
        let Type::Path(p) = ty else {
            panic!("{at}: no TOML shape known for `{}`", type_text(ty));
        };
        let args = type_args(ty);
        let arg = |i: usize| {
            *args
                .get(i)
                .unwrap_or_else(|| panic!("{at}: `{}` without its type argument", type_text(ty)))
        };
        match self.resolve(module, &p.path) {
            Ok((m, name)) => self.item_shape(&m, &name, at),
            Err(full) => match full.rsplit("::").next().unwrap_or_default() {
                "String" | "str" | "PathBuf" => Shape::Str,
                "bool" => Shape::Bool,
                "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
                    Shape::Int
                }
                "f32" | "f64" => Shape::Float,
                "Box" => self.shape(module, arg(0), at),
                "Vec" | "BTreeSet" | "HashSet" => {
                    Shape::Array(Box::new(self.shape(module, arg(0), at)))
                }
                "BTreeMap" | "HashMap" => {
                    assert_eq!(
                        self.shape(module, arg(0), at),
                        Shape::Str,
                        "{at}: a map's keys must be strings in TOML"
                    );
                    Shape::Map(Box::new(self.shape(module, arg(1), at)))
                }
                "Value" if full.starts_with("toml") || full.starts_with("serde_json") => Shape::Any,
                _ => panic!(
                    "{at}: no TOML shape known for `{}` ({full}): extend \
                     shared/model/tests/reference.rs",
                    type_text(ty)
                ),
            },
        }
    }

    fn item_shape(&self, module: &str, name: &str, at: &str) -> Shape {
        for item in self.items(module) {
            match item {
                Item::Struct(s) if s.ident == name => {
                    return Shape::Table(module.to_string(), name.to_string());
                }
                Item::Enum(e) if e.ident == name => {
                    let at = format!("{module}.rs {name}");
                    let attrs = serde_attrs(&e.attrs, &at);
                    if attrs.contains_key("untagged") {
                        return Shape::OneOf(
                            e.variants
                                .iter()
                                .map(|v| match &v.fields {
                                    Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                                        self.shape(module, &f.unnamed[0].ty, &at)
                                    }
                                    _ => panic!(
                                        "{at}::{}: an untagged variant that is not one value: \
                                         extend the generator",
                                        v.ident
                                    ),
                                })
                                .collect(),
                        );
                    }
                    for unsupported in ["tag", "content", "from", "try_from"] {
                        assert!(
                            !attrs.contains_key(unsupported),
                            "{at}: #[serde({unsupported})] is not read by the generator: extend it"
                        );
                    }
                    let rule = attrs.get("rename_all").cloned().flatten();
                    return Shape::Values(
                        e.variants
                            .iter()
                            .map(|v| {
                                assert!(
                                    matches!(v.fields, Fields::Unit),
                                    "{at}::{}: a tagged variant with data: extend the generator",
                                    v.ident
                                );
                                let vattrs = serde_attrs(&v.attrs, &at);
                                vattrs.get("rename").cloned().flatten().unwrap_or_else(|| {
                                    rename_all(rule.as_deref(), &v.ident.to_string(), true)
                                })
                            })
                            .collect(),
                    );
                }
                _ => {}
            }
        }
        panic!("{at}: no struct or enum {name} in src/{module}.rs");
    }

    fn enum_doc(&self, shape: &Shape, module: &str, ty: &Type) -> Option<String> {
        if !matches!(shape, Shape::OneOf(_) | Shape::Values(_)) {
            return None;
        }
        let Type::Path(p) = ty else { return None };
        let (m, name) = self.resolve(module, &p.path).ok()?;
        self.items(&m).iter().find_map(|item| match item {
            Item::Enum(e) if e.ident == name => doc(&e.attrs),
            _ => None,
        })
    }

    /// The value `Default::default()` gives a type of this crate, from its `impl Default`.
    fn default_impl(&self, module: &str, name: &str, at: &str) -> String {
        for item in self.items(module) {
            if let Item::Impl(imp) = item {
                let is_default = imp
                    .trait_
                    .as_ref()
                    .is_some_and(|(_, path, _)| path.is_ident("Default"));
                let for_it = matches!(&*imp.self_ty, Type::Path(p) if p.path.is_ident(name));
                if is_default && for_it {
                    for f in &imp.items {
                        if let syn::ImplItem::Fn(f) = f {
                            return body_literal(&f.block, &format!("{at} (impl Default)"));
                        }
                    }
                }
            }
        }
        panic!("{at}: no impl Default for {name} in src/{module}.rs: extend the generator");
    }

    /// The default of a field's type when serde uses `Default::default()`.
    fn type_default(&self, module: &str, ty: &Type, shape: &Shape, at: &str) -> String {
        if let Some(d) = default_of_scalar(shape) {
            return d.to_string();
        }
        let resolved = match ty {
            Type::Path(p) => self.resolve(module, &p.path).ok(),
            _ => None,
        };
        let Some((m, name)) = resolved else {
            panic!(
                "{at}: the default of `{}` is not known to the generator",
                type_text(ty)
            );
        };
        let derived = self.items(&m).iter().any(|i| match i {
            Item::Struct(s) => s.ident == name && derives(&s.attrs, "Default"),
            _ => false,
        });
        if derived {
            "each key's default".to_string()
        } else {
            self.default_impl(&m, &name, at)
        }
    }

    fn default_fn(&self, module: &str, path: &str, at: &str) -> String {
        for item in self.items(module) {
            if let Item::Fn(f) = item
                && f.sig.ident == path
            {
                return body_literal(&f.block, &format!("{at} (default = {path:?})"));
            }
        }
        panic!("{at}: default = {path:?}: no fn {path} in src/{module}.rs");
    }

    fn table(&self, module: &str, name: &str) -> Table {
        let item = self
            .items(module)
            .iter()
            .find_map(|i| match i {
                Item::Struct(s) if s.ident == name => Some(s),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no struct {name} in src/{module}.rs"));
        let at = format!("{module}.rs {name}");
        let attrs = serde_attrs(&item.attrs, &at);
        for unsupported in ["from", "try_from", "transparent", "remote"] {
            assert!(
                !attrs.contains_key(unsupported),
                "{at}: #[serde({unsupported})] is not read by the generator: extend it"
            );
        }
        let container_default = attrs.contains_key("default");
        assert!(
            !container_default || derives(&item.attrs, "Default"),
            "{at}: #[serde(default)] on a struct with its own impl Default: extend the generator"
        );
        let rule = attrs.get("rename_all").cloned().flatten();
        let Fields::Named(fields) = &item.fields else {
            panic!("{at}: not a struct with named fields: extend the generator");
        };
        let mut keys = Vec::new();
        for field in &fields.named {
            let ident = field.ident.as_ref().unwrap().to_string();
            let at = format!("{at}.{ident}");
            let fattrs = serde_attrs(&field.attrs, &at);
            for unsupported in ["deserialize_with", "with", "getter"] {
                assert!(
                    !fattrs.contains_key(unsupported),
                    "{at}: #[serde({unsupported})] is not read by the generator: extend it"
                );
            }
            if fattrs.contains_key("skip") || fattrs.contains_key("skip_deserializing") {
                continue;
            }
            if fattrs.contains_key("flatten") {
                let Shape::Table(m, n) = self.shape(module, &field.ty, &at) else {
                    panic!("{at}: #[serde(flatten)] of a type that is not a struct");
                };
                keys.extend(self.table(&m, &n).keys);
                continue;
            }
            let optional = matches!(&field.ty, Type::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "Option"));
            let inner = if optional {
                type_args(&field.ty)[0]
            } else {
                &field.ty
            };
            let shape = self.shape(module, inner, &at);
            let default = match fattrs.get("default") {
                Some(Some(path)) => Some(self.default_fn(module, path, &at)),
                Some(None) if optional => None,
                Some(None) => Some(self.type_default(module, inner, &shape, &at)),
                None if container_default && !optional => {
                    Some(self.type_default(module, inner, &shape, &at))
                }
                None => None,
            };
            keys.push(Key {
                name: fattrs
                    .get("rename")
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| rename_all(rule.as_deref(), &ident, false)),
                aliases: fattrs
                    .iter()
                    .filter(|(k, _)| *k == "alias")
                    .filter_map(|(_, v)| v.clone())
                    .collect(),
                required: !optional && default.is_none(),
                type_doc: self.enum_doc(&shape, module, inner),
                shape,
                default,
                doc: doc(&field.attrs),
                origin: format!("shared/model/src/{at}"),
            });
        }
        Table {
            doc: doc(&item.attrs),
            keys,
            deny_unknown: attrs.contains_key("deny_unknown_fields"),
        }
    }
}

/// Rustdoc's links (`[`crate::Unique`]`) as code for the book, `crate::` as the crate's name.
fn unlink(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start..].find("`]") else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(&rest[start + 1..start + len + 1]);
        rest = &rest[start + len + 2..];
        if rest.starts_with('(')
            && let Some(close) = rest.find(')')
        {
            rest = &rest[close + 1..];
        }
    }
    out.push_str(rest);
    out.replace("`crate::", "`cqrs_model::")
}

/// Text for one table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    unlink(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn anchor(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// The placeholder of a table's name in its path: the one its doc comment writes
/// (`[routes.<function>]`) unless that is the generic `<name>`, else the key's singular
/// (`attributes` -> `<attribute>`), else `<name>`; never one the path already holds.
fn placeholder(doc: Option<&str>, key: &str, path: &str) -> String {
    let from_doc = doc
        .and_then(|d| d.split('`').nth(1))
        .map(|code| code.trim_end_matches(']'))
        .filter(|code| code.ends_with('>'))
        .and_then(|code| code.rfind('<').map(|i| code[i..].to_string()))
        .filter(|p| p != "<name>");
    let singular = if let Some(stem) = key.strip_suffix("ies") {
        Some(format!("<{stem}y>"))
    } else if let Some(stem) = key.strip_suffix("xes") {
        Some(format!("<{stem}x>"))
    } else {
        key.strip_suffix('s').map(|stem| format!("<{stem}>"))
    };
    from_doc
        .into_iter()
        .chain(singular)
        .chain(["<name>".to_string(), format!("<{key}-name>")])
        .find(|p| !path.contains(p.as_str()))
        .unwrap_or_else(|| format!("<{key}-name>"))
}

struct Section {
    path: String,
    table: Table,
}

struct Walk<'a> {
    source: &'a Source,
    sections: Vec<Section>,
    /// (module, struct) -> its section's path (each struct is described once, where first met).
    seen: BTreeMap<(String, String), String>,
}

impl Walk<'_> {
    fn visit(&mut self, module: &str, name: &str, path: String) {
        let id = (module.to_string(), name.to_string());
        if self.seen.contains_key(&id) {
            return;
        }
        self.seen.insert(id, path.clone());
        let table = self.source.table(module, name);
        let mut children = Vec::new();
        for key in &table.keys {
            let base = if path.is_empty() {
                key.name.clone()
            } else {
                format!("{path}.{}", key.name)
            };
            self.children(&key.shape, &key.name, base, &mut children);
        }
        self.sections.push(Section { path, table });
        for (m, n, p) in children {
            self.visit(&m, &n, p);
        }
    }

    fn children(
        &self,
        shape: &Shape,
        key: &str,
        base: String,
        out: &mut Vec<(String, String, String)>,
    ) {
        match shape {
            Shape::Table(m, n) => out.push((m.clone(), n.clone(), base)),
            Shape::Map(inner) => {
                let doc = match &**inner {
                    Shape::Table(m, n) => self.source.table(m, n).doc,
                    _ => None,
                };
                let ph = placeholder(doc.as_deref(), key, &base);
                self.children(inner, key, format!("{base}.{ph}"), out);
            }
            Shape::Array(inner) => self.children(inner, key, format!("{base}[]"), out),
            Shape::OneOf(shapes) => {
                for s in shapes {
                    self.children(s, key, base.clone(), out);
                }
            }
            _ => {}
        }
    }
}

fn heading(path: &str) -> String {
    if path.is_empty() {
        "The top level".to_string()
    } else if let Some(array) = path.strip_suffix("[]") {
        format!("`[[{array}]]`")
    } else {
        format!("`[{path}]`")
    }
}

fn type_cell(shape: &Shape, seen: &BTreeMap<(String, String), String>) -> String {
    match shape {
        Shape::Str => "string".into(),
        Shape::Bool => "boolean".into(),
        Shape::Int => "integer".into(),
        Shape::Float => "float".into(),
        Shape::Any => "any TOML value".into(),
        Shape::Array(inner) if matches!(**inner, Shape::Table(..)) => {
            format!("array of tables {}", type_cell(inner, seen))
        }
        Shape::Array(inner) => format!("array of {}", type_cell(inner, seen)),
        Shape::Map(inner) if matches!(**inner, Shape::Table(..)) => {
            format!("tables by name, each {}", type_cell(inner, seen))
        }
        Shape::Map(inner) => format!("table of {}", type_cell(inner, seen)),
        Shape::Table(m, n) => {
            let path = &seen[&(m.clone(), n.clone())];
            format!("[{}](#{})", heading(path), anchor_of(path))
        }
        Shape::OneOf(shapes) => shapes
            .iter()
            .map(|s| type_cell(s, seen))
            .collect::<Vec<_>>()
            .join(" or "),
        Shape::Values(values) => format!(
            "one of {}",
            values
                .iter()
                .map(|v| format!("`{v:?}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn render(walk: &Walk<'_>) -> String {
    let mut page = String::new();
    page.push_str("# The model file: `model.toml`\n\n");
    let _ = writeln!(
        page,
        "<!-- Generated by shared/model/tests/reference.rs from shared/model/src (the serde \
         shapes of\n     model.toml, from RawModel in spec.rs); do not edit. Refresh: {REFRESH} -->\n"
    );
    page.push_str(concat!(
        "Every table and key of a service's `model.toml`, read from the model crate's own\n",
        "definitions (`shared/model/src/spec.rs` and the files it reaches), and tested to match\n",
        "them. A required key may not be left out; a key that may, and has no default here, is\n",
        "absent unless written (its description or the chapters say what that means). `<name>`\n",
        "parts of a path are names you choose. The [Modelling](../modelling.md) chapter shows the\n",
        "file at work; `cqrs model check` checks one, naming the entity and the field of each\n",
        "problem.\n\n",
    ));
    for section in &walk.sections {
        let _ = writeln!(
            page,
            "- [{}](#{})",
            heading(&section.path),
            anchor_of(&section.path)
        );
    }
    for section in &walk.sections {
        let _ = write!(
            page,
            "\n## {} {{#{}}}\n\n",
            heading(&section.path),
            anchor_of(&section.path)
        );
        if let Some(d) = &section.table.doc {
            let _ = writeln!(page, "{}\n", unlink(d));
        }
        page.push_str(if section.table.deny_unknown {
            "Any other key is an error.\n\n"
        } else {
            "Other keys are ignored.\n\n"
        });
        page.push_str("| key | type | required | default | description |\n");
        page.push_str("| --- | --- | --- | --- | --- |\n");
        for key in &section.table.keys {
            let mut name = format!("`{}`", key.name);
            for alias in &key.aliases {
                let _ = write!(name, " (or `{alias}`)");
            }
            let mut text = key
                .doc
                .as_deref()
                .map(cell)
                .unwrap_or_else(|| "*(no doc comment)*".to_string());
            if let Some(d) = &key.type_doc {
                let _ = write!(text, "<br>{}", cell(d));
            }
            let _ = writeln!(
                page,
                "| {name} | {} | {} | {} | {text} |",
                type_cell(&key.shape, &walk.seen).replace('|', "\\|"),
                if key.required { "yes" } else { "no" },
                key.default
                    .as_deref()
                    .map(|d| if d.starts_with("each") {
                        d.to_string()
                    } else {
                        format!("`{}`", d.replace('|', "\\|"))
                    })
                    .unwrap_or_default(),
            );
        }
    }
    page
}

fn anchor_of(path: &str) -> String {
    if path.is_empty() {
        "top-level".into()
    } else {
        anchor(path)
    }
}

fn walk(source: &Source) -> Walk<'_> {
    let mut walk = Walk {
        source,
        sections: Vec::new(),
        seen: BTreeMap::new(),
    };
    walk.visit(START.0, START.1, String::new());
    walk
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

/// Whether `value` is valid for `shape` as the page describes it; problems into `errors`.
fn validate(
    walk: &Walk<'_>,
    shape: &Shape,
    value: &toml::Value,
    at: &str,
    errors: &mut Vec<String>,
) {
    let mut wrong = |what: &str| errors.push(format!("{at}: {what}, got {value:?}"));
    match shape {
        Shape::Str if !value.is_str() => wrong("a string"),
        Shape::Bool if !value.is_bool() => wrong("a boolean"),
        Shape::Int if !value.is_integer() => wrong("an integer"),
        Shape::Float if !value.is_float() && !value.is_integer() => wrong("a float"),
        Shape::Values(values) if !values.iter().any(|v| value.as_str() == Some(v.as_str())) => {
            wrong(&format!("one of {values:?}"))
        }
        Shape::Array(inner) => match value.as_array() {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    validate(walk, inner, item, &format!("{at}[{i}]"), errors);
                }
            }
            None => wrong("an array"),
        },
        Shape::Map(inner) => match value.as_table() {
            Some(table) => {
                for (k, v) in table {
                    validate(walk, inner, v, &join(at, k), errors);
                }
            }
            None => wrong("a table"),
        },
        Shape::OneOf(shapes) => {
            let fits = shapes.iter().any(|s| {
                let mut e = Vec::new();
                validate(walk, s, value, at, &mut e);
                e.is_empty()
            });
            if !fits {
                wrong(&format!("one of {shapes:?}"));
            }
        }
        Shape::Table(m, n) => {
            let path = &walk.seen[&(m.clone(), n.clone())];
            let section = walk.sections.iter().find(|s| &s.path == path).unwrap();
            let Some(table) = value.as_table() else {
                return wrong("a table");
            };
            for (k, v) in table {
                match section
                    .table
                    .keys
                    .iter()
                    .find(|key| key.name == *k || key.aliases.contains(k))
                {
                    Some(key) => validate(walk, &key.shape, v, &join(at, k), errors),
                    None if section.table.deny_unknown => {
                        errors.push(format!("{}: not a key of {}", join(at, k), heading(path)))
                    }
                    None => {}
                }
            }
            for key in section.table.keys.iter().filter(|k| k.required) {
                if !table.contains_key(&key.name)
                    && !key.aliases.iter().any(|a| table.contains_key(a))
                {
                    errors.push(format!(
                        "{}: the required key is missing",
                        join(at, &key.name)
                    ));
                }
            }
        }
        _ => {}
    }
}

#[test]
fn the_books_model_reference_is_the_model_crates_definitions() {
    let source = Source::load();
    let walk = walk(&source);
    let got = render(&walk);
    let mut anchors: Vec<String> = walk.sections.iter().map(|s| anchor_of(&s.path)).collect();
    anchors.sort();
    anchors.dedup();
    assert_eq!(
        anchors.len(),
        walk.sections.len(),
        "two sections with one anchor"
    );
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(PAGE, &got).expect("write the page");
        return;
    }
    let want = std::fs::read_to_string(PAGE).unwrap_or_default();
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        panic!(
            "book/src/reference/model.md is not what shared/model/src declares (first difference \
             at line {}: page {:?}, code {:?}); if the change is intended: {REFRESH}",
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            got.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

#[test]
fn every_model_file_the_crate_accepts_fits_the_reference() {
    let source = Source::load();
    let walk = walk(&source);
    let root = Shape::Table(START.0.into(), START.1.into());
    let mut models = vec![(
        "EXAMPLE_TOML".to_string(),
        cqrs_model::EXAMPLE_TOML.to_string(),
    )];
    for rel in [
        "tests/library/model.toml",
        "tools/cli/tests/snapshots/new/library/model.toml",
    ] {
        if let Ok(text) = std::fs::read_to_string(Path::new(ROOT).join(rel)) {
            models.push((rel.to_string(), text));
        }
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for entry in std::fs::read_dir(&fixtures).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            models.push((
                format!(
                    "shared/model/tests/fixtures/{}",
                    path.file_name().unwrap().to_string_lossy()
                ),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    let mut checked = 0;
    for (name, text) in &models {
        if cqrs_model::Model::parse(text).is_err() {
            assert_ne!(name, "EXAMPLE_TOML", "the example model does not parse");
            continue;
        }
        let value = toml::Value::Table(toml::from_str::<toml::Table>(text).unwrap());
        let mut errors = Vec::new();
        validate(&walk, &root, &value, "", &mut errors);
        assert!(
            errors.is_empty(),
            "{name} parses, but does not fit the reference page's description:\n{}",
            errors.join("\n")
        );
        eprintln!("fits: {name}");
        checked += 1;
    }
    eprintln!("{checked} model files fit the reference page's description");
    assert!(checked >= 2, "only {checked} model files checked");
    // And a key the description does not have is refused by the crate too.
    let bad = format!("no_such_key = true\n{}", cqrs_model::EXAMPLE_TOML);
    let value = toml::Value::Table(toml::from_str::<toml::Table>(&bad).unwrap());
    let mut errors = Vec::new();
    validate(&walk, &root, &value, "", &mut errors);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(cqrs_model::Model::parse(&bad).is_err());
}

#[test]
fn keys_without_a_doc_comment_do_not_grow() {
    let source = Source::load();
    let walk = walk(&source);
    let undocumented: Vec<String> = walk
        .sections
        .iter()
        .flat_map(|s| {
            s.table
                .keys
                .iter()
                .filter(|k| k.doc.is_none())
                .map(|k| format!("{} (key `{}` of {})", k.origin, k.name, heading(&s.path)))
        })
        .collect();
    eprintln!(
        "{} keys of model.toml without a doc comment:\n{}",
        undocumented.len(),
        undocumented.join("\n")
    );
    assert!(
        undocumented.len() <= UNDOCUMENTED_AT_MOST,
        "{} keys without a doc comment, more than {UNDOCUMENTED_AT_MOST}: document the new key's \
         field with `///` (the book's reference page shows it), then {REFRESH}",
        undocumented.len()
    );
}
