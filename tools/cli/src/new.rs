//! `cqrs new <dir>`: a new service on the framework. It writes the service's `Cargo.toml` (the
//! framework's facade crate `cqrs-dynamo` from a path, a git repository or the registry, by
//! `--framework`), a starter `model.toml`, `template.yaml` (the SAM template, whose data table
//! holds the model's GSIs), its own code in `src/lib.rs` (`impl cqrs_dynamo::Service`: its model,
//! migrations and an example command hook; an own route's handler), its typed entities in
//! `src/model.rs` (what `cqrs model rust --crate cqrs_dynamo::item` prints), the functions'
//! binaries (one call of `cqrs_dynamo::run` each; the change feed's publisher and a consumer among
//! them), sample `events/`, tests of the model and what is generated from it, a Makefile and a
//! README. Everything is rendered from the files under `src/new/` of this package, so the output
//! is the same on every machine ([`render`], snapshot-tested).
//!
//! Where the crates come from ([`Framework::resolve`]): `--framework` when given; else, when the
//! `cqrs` binary runs where it was built from a checkout of the framework (its sources are still
//! there), that checkout (`path:`, absolute); else the registry at the CLI's own version. The
//! framework's crates are not published yet, so `version:` is checked before anything is written:
//! the crates must resolve from the registry (`cargo generate-lockfile` on a scratch manifest), or
//! `cqrs new` stops with what to use instead; `--no-registry-check` skips the check (to generate
//! for later, offline).
//!
//! The SAM template is the framework's own: this repository's `template.yaml` is what [`sam_template`]
//! renders for its model (a test holds them equal), so a generated service deploys exactly what the
//! example deploys, with its own tables' GSIs. A new service's `template.yaml` and its `cargo lambda
//! watch` router are what `cqrs template` writes ([`crate::template`]): the framework's template, a
//! function per `[routes.<name>]` of its model, and its own part, `template.own.yaml` (written here
//! with comments only).

use std::path::{Path, PathBuf};

use cqrs_model::Model;

/// The SAM template, with `{{prefix}}` (the default resource prefix) and the data table's line
/// `# {{data-table}}` to fill in.
const TEMPLATE: &str = include_str!("new/template.yaml");
const CARGO_TOML: &str = include_str!("new/service/Cargo.toml.in");
const MODEL_TOML: &str = include_str!("new/service/model.toml");
const README: &str = include_str!("new/service/README.md.in");
const MAKEFILE: &str = include_str!("new/service/Makefile");
const GITIGNORE: &str = include_str!("new/service/gitignore");
const REQUIREMENTS: &str = include_str!("new/service/requirements-tools.txt");
const COMMAND_HANDLER: &str = include_str!("new/service/src/bin/command-handler.rs");
const DATA_SYNC: &str = include_str!("new/service/src/bin/data-sync.rs");
const QUERY_HANDLER: &str = include_str!("new/service/src/bin/query-handler.rs");
const SQL_SYNC: &str = include_str!("new/service/src/bin/sql-sync.rs");
const TASK_REPORT: &str = include_str!("new/service/src/bin/task-report.rs");
const EVENT_PUBLISHER: &str = include_str!("new/service/src/bin/event-publisher.rs");
const TASK_AUDIT: &str = include_str!("new/service/src/bin/task-audit.rs");
const REALTIME: &str = include_str!("new/service/src/bin/realtime.rs");
const CHANGE_LOG: &str = include_str!("new/service/src/bin/change-log.rs");
const LIB: &str = include_str!("new/service/src/lib.rs.in");
const MODEL_TEST: &str = include_str!("new/service/tests/model.rs");
const REPORT_TEST: &str = include_str!("new/service/tests/report.rs");
const EVENTS_TEST: &str = include_str!("new/service/tests/events.rs");
const CREATE_EVENT: &str = include_str!("new/service/events/command-handler/create-task.json");
const QUERY_EVENT: &str = include_str!("new/service/events/query-handler/tasks-of-owner.json");
const TEMPLATE_OWN: &str = include_str!("new/service/template.own.yaml");

/// The framework crates a service depends on, and where each lives in the framework's repository:
/// the facade alone (its dev-dependency too, with the feature `testkit`).
pub(crate) const CRATES: [(&str, &str); 1] = [("cqrs-dynamo", "facade")];

/// The features of the facade a service's tests take (`{{dep:cqrs-dynamo+testkit}}`).
const TEST_FEATURES: &[&str] = &["testkit"];

/// Where the service takes the framework's crates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framework {
    /// A checkout of the framework's repository (its root), as a path from the service's folder.
    Path(PathBuf),
    /// The framework's git repository.
    Git(String),
    /// The registry, at this version requirement.
    Version(String),
}

impl Framework {
    /// Reads `path:DIR`, `git:URL` or `version:REQ`.
    pub fn parse(text: &str) -> Result<Framework, String> {
        match text.split_once(':') {
            Some(("path", dir)) if !dir.is_empty() => Ok(Framework::Path(PathBuf::from(dir))),
            Some(("git", url)) if !url.is_empty() => Ok(Framework::Git(url.to_string())),
            Some(("version", req)) if !req.is_empty() => Ok(Framework::Version(req.to_string())),
            _ => Err(format!(
                "--framework {text:?}: use path:DIR (a checkout of the framework), git:URL or version:REQ"
            )),
        }
    }

    /// The dependency's TOML value for `krate`, which lives at `subdir` of the framework, with
    /// `features` (none: its default ones).
    fn dependency(&self, krate: &str, subdir: &str, features: &[&str]) -> String {
        let _ = krate;
        let source = match self {
            Framework::Path(root) => {
                let path = root.join(subdir);
                format!("path = {}", toml_string(&path.to_string_lossy()))
            }
            Framework::Git(url) => format!("git = {}", toml_string(url)),
            Framework::Version(req) if features.is_empty() => return toml_string(req),
            Framework::Version(req) => format!("version = {}", toml_string(req)),
        };
        if features.is_empty() {
            format!("{{ {source} }}")
        } else {
            let features: Vec<String> = features.iter().map(|f| toml_string(f)).collect();
            format!("{{ {source}, features = [{}] }}", features.join(", "))
        }
    }
}

impl Framework {
    /// The source of the crates for `cqrs new`: `flag` (`--framework`) when given, else
    /// [`Framework::default_source`] (said on stderr). A `version:` source is checked against the
    /// registry ([`check_registry`]) unless `skip_registry_check`, which says on stderr that it
    /// was not checked. Errors say what to use instead; nothing has been written then.
    pub fn resolve(flag: Option<&str>, skip_registry_check: bool) -> Result<Framework, String> {
        let framework = match flag {
            Some(text) => Framework::parse(text)?,
            None => {
                let framework = Framework::default_source();
                eprintln!(
                    "cqrs new: the framework's crates from {} ({}; --framework chooses another source)",
                    framework.flag(),
                    match framework {
                        Framework::Path(_) => "the checkout this cqrs was built from",
                        _ => "the registry, at this cqrs's version",
                    }
                );
                framework
            }
        };
        if let Framework::Version(req) = &framework {
            if skip_registry_check {
                eprintln!(
                    "cqrs new: warning: --framework version:{req} not checked (--no-registry-check): \
                     the framework's crates are not published on the registry yet, and the service \
                     will not build until they resolve there"
                );
            } else {
                check_registry(req)?;
            }
        }
        Ok(framework)
    }

    /// The default source: the checkout this binary was built from ([`checkout`]) when it is still
    /// there, else the registry at this CLI's version.
    pub fn default_source() -> Framework {
        match checkout() {
            Some(root) => Framework::Path(root),
            None => Framework::Version(env!("CARGO_PKG_VERSION").to_string()),
        }
    }

    /// The `--framework` value that names this source.
    pub fn flag(&self) -> String {
        match self {
            Framework::Path(root) => format!("path:{}", root.display()),
            Framework::Git(url) => format!("git:{url}"),
            Framework::Version(req) => format!("version:{req}"),
        }
    }

    /// What `cargo install` takes to install the framework's operator CLI (`cqrs`) from the same
    /// source as the crates.
    ///
    /// ```text
    /// path:../cqrs-dynamo   --path ../cqrs-dynamo/tools/cli
    /// git:URL               --git URL cqrs-cli
    /// version:0.1           cqrs-cli --version 0.1
    /// ```
    pub fn cli_install(&self) -> String {
        match self {
            Framework::Path(root) => format!("--path {}", root.join("tools/cli").display()),
            Framework::Git(url) => format!("--git {url} cqrs-cli"),
            Framework::Version(req) => format!("cqrs-cli --version {req}"),
        }
    }
}

/// The checkout of the framework this binary was built from (`tools/cli`'s manifest folder, two
/// levels up), when it is still there: a workspace holding every framework crate. Not when the
/// binary was built by `cargo install --git` or from the registry: those sources sit in cargo's
/// own cache, which it cleans.
pub fn checkout() -> Option<PathBuf> {
    checkout_at(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}

/// [`checkout`] for a candidate folder: its canonical path when it is a framework checkout.
fn checkout_at(candidate: &Path) -> Option<PathBuf> {
    let root = candidate.canonicalize().ok()?;
    // cargo install --git and from the registry build in $CARGO_HOME/git/checkouts/ and
    // $CARGO_HOME/registry/src/.
    let text = root.to_string_lossy();
    let cached = text.contains("/git/checkouts/") || text.contains("/registry/src/");
    if cached {
        return None;
    }
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    let crates = CRATES
        .iter()
        .all(|(_, subdir)| root.join(subdir).join("Cargo.toml").is_file());
    (manifest.contains("[workspace]") && crates).then_some(root)
}

/// Whether the framework's crates resolve from the registry at version requirement `req`: `cargo
/// generate-lockfile` on a scratch manifest that depends on every crate a service uses (cargo's
/// own resolution, with its network settings: `CARGO_NET_OFFLINE=true` keeps it offline). The
/// error says cargo's reason and what to use instead.
pub fn check_registry(req: &str) -> Result<(), String> {
    let scratch =
        std::env::temp_dir().join(format!("cqrs-new-registry-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let result = resolve_in(&scratch, req);
    let _ = std::fs::remove_dir_all(&scratch);
    let reason = match result {
        Ok(()) => return Ok(()),
        Err(reason) => reason,
    };
    let checkout = checkout().map_or_else(
        || "<a checkout of the framework>".to_string(),
        |root| root.display().to_string(),
    );
    Err(format!(
        "--framework version:{req}: the framework's crates do not resolve from the registry: \
         they are not published there yet.\n{reason}\n\
         Use a checkout of the framework: --framework path:{checkout} (or a path relative to the \
         new service's folder), or its git repository: --framework git:<url>. To write the \
         service anyway (it builds once the crates are published): --no-registry-check."
    ))
}

/// Writes the scratch manifest into `dir` and resolves it; cargo's message when it fails.
fn resolve_in(dir: &Path, req: &str) -> Result<(), String> {
    let mut manifest = String::from(
        "[package]\nname = \"cqrs-registry-check\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[lib]\npath = \"lib.rs\"\n\n[workspace]\n\n[dependencies]\n",
    );
    for (krate, _) in CRATES {
        manifest.push_str(&format!("{krate} = {}\n", toml_string(req)));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(dir.join("Cargo.toml"), manifest)
        .and_then(|()| std::fs::write(dir.join("lib.rs"), ""))
        .map_err(|e| format!("cannot write into {}: {e}", dir.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(&cargo)
        .arg("generate-lockfile")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("cargo could not run ({e}), so the registry was not checked"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason: Vec<&str> = stderr
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .take(4)
        .collect();
    Err(format!("cargo generate-lockfile: {}", reason.join("\n  ")))
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The name of the service's type in its `src/lib.rs` (`impl cqrs_dynamo::Service for Library`):
/// the service's name in PascalCase (`library` -> `Library`, `shop-2` -> `Shop2`), with `Service`
/// after it where that is a name the starter's `src/lib.rs` already uses, a type or trait of
/// Rust's prelude or a keyword (`query` -> `QueryService`, `self` -> `SelfService`).
pub fn service_type(name: &str) -> String {
    /// The prelude's types, traits and variants, and `Self`.
    const PRELUDE: &str = "Box Option Result String Vec Some None Ok Err Copy Clone Send Sync \
        Sized Unpin Default Drop Fn FnMut FnOnce Iterator IntoIterator DoubleEndedIterator \
        ExactSizeIterator Extend ToString ToOwned Eq PartialEq Ord PartialOrd AsRef AsMut Into \
        From TryFrom TryInto FromIterator Future IntoFuture Self";
    let pascal: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect();
    // The code of lib.rs, its comments left out (a type does not collide with prose).
    let in_lib = LIB
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .any(|word| word == pascal);
    if in_lib || PRELUDE.split_whitespace().any(|word| word == pascal) {
        format!("{pascal}Service")
    } else {
        pascal
    }
}

/// Whether `name` can name a service: it is the package name and the default resource prefix of its
/// stack (lower-case letters, digits and hyphens, starting with a letter, at most 40 characters).
pub fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if first_ok && rest_ok && name.len() <= 40 && !name.ends_with('-') {
        Ok(())
    } else {
        Err(format!(
            "service name {name:?}: lower-case letters, digits and hyphens, starting with a letter, \
             not ending with a hyphen, at most 40 characters (it names the package and the stack's \
             resources)"
        ))
    }
}

/// The SAM template for `model`, with `prefix` as the default resource prefix: the framework's
/// template, its data table's `AttributeDefinitions`, `KeySchema` and `GlobalSecondaryIndexes` those
/// of the model (every GSI with Contributor Insights behind the template's parameter).
pub fn sam_template(model: &Model, prefix: &str) -> String {
    let mut data_table = String::new();
    for line in model.data_table_yaml().lines() {
        data_table.push_str(line);
        data_table.push('\n');
        if line.starts_with("        - IndexName: ") {
            data_table.push_str("          ContributorInsightsSpecification:\n");
            data_table.push_str("            Enabled: !If [ContributorInsightsOn, true, false]\n");
        }
    }
    let mut out = String::with_capacity(TEMPLATE.len() + data_table.len());
    for line in TEMPLATE.split_inclusive('\n') {
        if line.trim_start().starts_with("# {{data-table}}") {
            out.push_str(&data_table);
        } else {
            out.push_str(&line.replace("{{prefix}}", prefix));
        }
    }
    out
}

/// Every file of a new service named `name`, by its path in the service's folder.
pub fn render(name: &str, framework: &Framework) -> Result<Vec<(PathBuf, String)>, String> {
    check_name(name)?;
    let model = Model::parse(MODEL_TOML).map_err(|e| format!("the starter model: {e}"))?;
    // The relational read model's first migration, and the schema it leads to.
    let schema = cqrs_sql::schema::Schema::of(&model);
    let first_migration = cqrs_sql::migrate::plan(None, &schema)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let schema_json = serde_json::to_string_pretty(&schema).map_err(|e| e.to_string())? + "\n";
    let fill = |text: &str| {
        let mut out = text
            .replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{service}}", &service_type(name))
            .replace("{{cli-install}}", &framework.cli_install());
        for (krate, subdir) in CRATES {
            out = out
                .replace(
                    &format!("{{{{dep:{krate}}}}}"),
                    &framework.dependency(krate, subdir, &[]),
                )
                .replace(
                    &format!("{{{{dep:{krate}+{}}}}}", TEST_FEATURES.join("+")),
                    &framework.dependency(krate, subdir, TEST_FEATURES),
                );
        }
        out
    };
    // template.yaml and the router are what `cqrs template` writes for the starter.
    let template = crate::template::render(&model, name, Some(TEMPLATE_OWN))?.text;
    let manifest = crate::template::replace_router_of(&fill(CARGO_TOML), &model)?;
    let files = [
        ("Cargo.toml", manifest),
        ("model.toml", MODEL_TOML.to_string()),
        ("template.yaml", template),
        ("template.own.yaml", TEMPLATE_OWN.to_string()),
        ("README.md", fill(README)),
        ("Makefile", fill(MAKEFILE)),
        (".gitignore", GITIGNORE.to_string()),
        ("requirements-tools.txt", REQUIREMENTS.to_string()),
        ("src/lib.rs", fill(LIB)),
        (
            "src/model.rs",
            cqrs_model::rust::render_with_path(&model, "cqrs_dynamo::item"),
        ),
        ("src/bin/command-handler.rs", fill(COMMAND_HANDLER)),
        ("src/bin/data-sync.rs", fill(DATA_SYNC)),
        ("src/bin/query-handler.rs", fill(QUERY_HANDLER)),
        ("src/bin/sql-sync.rs", fill(SQL_SYNC)),
        ("src/bin/task-report.rs", fill(TASK_REPORT)),
        ("src/bin/event-publisher.rs", fill(EVENT_PUBLISHER)),
        ("src/bin/task-audit.rs", fill(TASK_AUDIT)),
        ("src/bin/realtime.rs", fill(REALTIME)),
        ("src/bin/change-log.rs", fill(CHANGE_LOG)),
        ("migrations/V1__model.sql", first_migration),
        ("migrations/schema.json", schema_json),
        ("tests/model.rs", fill(MODEL_TEST)),
        ("tests/report.rs", REPORT_TEST.to_string()),
        ("tests/events.rs", EVENTS_TEST.to_string()),
        (
            "events/command-handler/create-task.json",
            CREATE_EVENT.to_string(),
        ),
        (
            "events/query-handler/tasks-of-owner.json",
            QUERY_EVENT.to_string(),
        ),
    ];
    Ok(files
        .into_iter()
        .map(|(path, text)| (PathBuf::from(path), text))
        .collect())
}

/// Writes a new service into `dir` (which must not exist, or be empty).
pub fn write(dir: &Path, name: &str, framework: &Framework) -> Result<Vec<PathBuf>, String> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "{} exists and is not empty: cqrs new writes a new service into an empty folder",
                dir.display()
            ));
        }
    }
    let files = render(name, framework)?;
    let mut written = Vec::with_capacity(files.len());
    for (path, text) in files {
        let target = dir.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&target, text)
            .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_are_read_from_their_flag() {
        assert_eq!(
            Framework::parse("version:0.1").unwrap(),
            Framework::Version("0.1".into())
        );
        assert_eq!(
            Framework::parse("path:../cqrs").unwrap(),
            Framework::Path("../cqrs".into())
        );
        assert_eq!(
            Framework::parse("git:https://example.org/cqrs.git").unwrap(),
            Framework::Git("https://example.org/cqrs.git".into())
        );
        for bad in ["0.1", "path:", "svn:x", ""] {
            assert!(Framework::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_package_names_and_stack_prefixes() {
        for good in ["library", "a", "shop-2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "Library",
            "9lives",
            "",
            "lib_rary",
            "library-",
            &"a".repeat(41),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dependencies_follow_the_framework_source() {
        let path = Framework::Path("../fw".into());
        assert_eq!(
            path.dependency("cqrs-dynamo", "facade", &[]),
            r#"{ path = "../fw/facade" }"#
        );
        let git = Framework::Git("https://example.org/fw.git".into());
        assert_eq!(
            git.dependency("cqrs-dynamo", "facade", &[]),
            r#"{ git = "https://example.org/fw.git" }"#
        );
        let version = Framework::Version("0.1".into());
        assert_eq!(version.dependency("cqrs-dynamo", "facade", &[]), r#""0.1""#);
        // The tests' dev-dependency: the same source, with the facade's testkit.
        assert_eq!(
            path.dependency("cqrs-dynamo", "facade", TEST_FEATURES),
            r#"{ path = "../fw/facade", features = ["testkit"] }"#
        );
        assert_eq!(
            git.dependency("cqrs-dynamo", "facade", TEST_FEATURES),
            r#"{ git = "https://example.org/fw.git", features = ["testkit"] }"#
        );
        assert_eq!(
            version.dependency("cqrs-dynamo", "facade", TEST_FEATURES),
            r#"{ version = "0.1", features = ["testkit"] }"#
        );
        assert_eq!(toml_string("a\"b\\c"), r#""a\"b\\c""#);
        // The operator CLI comes from the same source as the crates.
        assert_eq!(path.cli_install(), "--path ../fw/tools/cli");
        assert_eq!(
            git.cli_install(),
            "--git https://example.org/fw.git cqrs-cli"
        );
        assert_eq!(
            Framework::Version("0.1".into()).cli_install(),
            "cqrs-cli --version 0.1"
        );
    }

    #[test]
    fn a_checkout_is_a_workspace_with_every_framework_crate() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        assert_eq!(checkout_at(&root), Some(root.canonicalize().unwrap()));
        assert_eq!(checkout(), Some(root.canonicalize().unwrap()));
        // A folder without the crates, or one that does not exist: no checkout.
        assert_eq!(checkout_at(Path::new(env!("CARGO_MANIFEST_DIR"))), None);
        assert_eq!(checkout_at(&root.join("no-such-folder")), None);
        // The same workspace inside cargo's cache (cargo install --git) is not one.
        let cache = std::env::temp_dir().join(format!(
            "cqrs-new-unit-{}/git/checkouts/cqrs-1a2b/0123abc",
            std::process::id()
        ));
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(cache.join("Cargo.toml"), "[workspace]\n").unwrap();
        for (_, subdir) in CRATES {
            std::fs::create_dir_all(cache.join(subdir)).unwrap();
            std::fs::write(cache.join(subdir).join("Cargo.toml"), "").unwrap();
        }
        assert_eq!(checkout_at(&cache), None);
        let top = cache.ancestors().nth(4).unwrap().to_path_buf();
        let _ = std::fs::remove_dir_all(top);
        // From a checkout, the default source is the checkout.
        assert_eq!(
            Framework::default_source(),
            Framework::Path(root.canonicalize().unwrap())
        );
        assert_eq!(Framework::Version("0.1".into()).flag(), "version:0.1");
    }

    #[test]
    fn the_service_type_is_the_name_in_pascal_case_unless_taken() {
        assert_eq!(service_type("library"), "Library");
        assert_eq!(service_type("tasks"), "Tasks");
        assert_eq!(service_type("shop-2"), "Shop2");
        assert_eq!(service_type("order-desk"), "OrderDesk");
        assert_eq!(service_type("a"), "A");
        // A name the starter's src/lib.rs uses, a prelude type, a keyword.
        assert_eq!(service_type("query"), "QueryService");
        assert_eq!(service_type("task-status"), "TaskStatusService");
        assert_eq!(service_type("result"), "ResultService");
        assert_eq!(service_type("self"), "SelfService");
    }

    #[test]
    fn every_placeholder_is_filled() {
        for framework in [
            Framework::Version("0.1".into()),
            Framework::Path("../fw".into()),
        ] {
            for (path, text) in render("library", &framework).unwrap() {
                assert!(
                    !text.contains("{{"),
                    "{} keeps a placeholder",
                    path.display()
                );
            }
        }
    }
}
