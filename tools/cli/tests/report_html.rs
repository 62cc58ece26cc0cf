//! The report's HTML page as a person sees it: rendered by headless Chromium (Debian's `chromium`;
//! `--no-sandbox`, as the tests run as root), the charts drawn as asked (as many bars as the top
//! list, the hot partition's label on its bar, the write heat chart of the hot partition), and a
//! screenshot kept at `target/test-artifacts/report/report.png`. Without Chromium the test fails
//! under CI (`CI=true`; `scripts/test.sh` installs it) and is skipped, loudly, elsewhere.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{HOT_PARTITION, Shape, artifacts, report};

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Runs Chromium headless on `page` with `args`, killed after a minute; returns stdout.
fn render(chromium: &Path, page: &Path, args: &[String]) -> String {
    let profile = std::env::temp_dir().join(format!("cqrs-report-chromium-{}", std::process::id()));
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1200,4800",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("chromium did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `<svg ...>...</svg>` element of the DOM whose opening tag holds every one of `marks`.
fn svg<'a>(dom: &'a str, marks: &[&str]) -> &'a str {
    let mut rest = dom;
    while let Some(start) = rest.find("<svg") {
        let tail = &rest[start..];
        let end = tail.find("</svg>").expect("closed svg") + "</svg>".len();
        let element = &tail[..end];
        let open = &element[..element.find('>').unwrap()];
        if marks.iter().all(|m| open.contains(m)) {
            return element;
        }
        rest = &tail[end..];
    }
    panic!("no svg with {marks:?} in the rendered page");
}

/// The value of `name="..."` in an element's opening tag.
fn attribute<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let open = &element[..element.find('>')?];
    let at = open.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = open[at..].find('"')?;
    Some(&open[at..at + len])
}

#[tokio::test]
async fn the_report_page_draws_its_charts_in_chromium() {
    let Some(chromium) = chromium() else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("chromium is not installed: scripts/test.sh installs Debian's chromium");
        }
        eprintln!("SKIPPED: chromium is not installed (apt-get install chromium); CI fails here");
        return;
    };
    let (_, _, json) = report(Shape::Skewed, "report", &[]).await;
    let page = artifacts().join("report.html");
    let source = std::fs::read_to_string(&page).unwrap();
    for remote in ["http://", "https://", "//cdn", "@import"] {
        assert!(
            !source.contains(remote),
            "the page must need no network: {remote}"
        );
    }
    let dom = render(&chromium, &page, &["--dump-dom".into()]);
    std::fs::write(artifacts().join("report.dom.html"), &dom).unwrap();

    let mut drawn = Vec::new();
    for scope in ["index gsi1", "entity ticket"] {
        let top = json["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["scope"] == scope)
            .unwrap()["top_by_items"]
            .as_array()
            .unwrap()
            .len();
        let chart = svg(&dom, &["chart top", &format!("data-scope=\"{scope}\"")]);
        let bars = chart.matches("<rect class=\"bar\"").count();
        assert_eq!(bars, top, "{scope}: one bar per partition of the top list");
        // The browser laid every bar out with a size (the page's script counts them).
        assert_eq!(
            attribute(chart, "data-drawn"),
            Some(top.to_string().as_str()),
            "{scope}"
        );
        drawn.push(format!("{bars} of {top} bars of {scope}"));
    }
    let status = svg(&dom, &["chart top", "data-scope=\"index gsi1\""]);
    let label = "<text class=\"label\"";
    let hot_label = status
        .split(label)
        .nth(1)
        .expect("a label in the status chart");
    assert!(
        hot_label.contains(&format!(">{HOT_PARTITION}</text>")),
        "first bar is the hot partition"
    );
    assert!(
        status.contains("<g class=\"hot\">"),
        "the flagged partition is marked"
    );

    let heat = svg(&dom, &["chart heat", "data-kind=\"write\""]);
    assert_eq!(attribute(heat, "data-partition"), Some(HOT_PARTITION));
    let heat_bars: usize = attribute(heat, "data-drawn").unwrap().parse().unwrap();
    assert!(heat_bars >= 1);
    assert!(
        heat.contains("class=\"limit\""),
        "the 1,000 WCU limit line is drawn"
    );

    let shot = artifacts().join("report.png");
    let _ = std::fs::remove_file(&shot);
    render(
        &chromium,
        &page,
        &[format!("--screenshot={}", shot.display())],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 50_000,
        "a blank page compresses far smaller: {} bytes",
        png.len()
    );
    println!(
        "report page: chromium drew {}; write heat {heat_bars} bar(s); screenshot {} ({} KB)",
        drawn.join(", "),
        shot.display(),
        png.len() / 1024
    );
}
