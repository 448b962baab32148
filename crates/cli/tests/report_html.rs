//! report.html in a real browser: a real run (nginx, backends on loopback, a reload and a
//! backend killed under load) writes report.html; headless Chromium (Debian's `chromium`)
//! opens it with the network emulated offline, driven over the DevTools protocol. The page must
//! fetch nothing from the network, log no console error and throw no exception, draw every
//! chart with its series, and mark each action at the time the run recorded it. A screenshot is
//! taken into the test's temporary directory (and also to PROXYBENCH_SCREENSHOT when that names
//! a file, which is how docs/report-html.png is made).

use serde_json::{json, Value};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SCENARIO: &str = r#"
name = "html"
description = "A reload and a backend killed under load, for the browser test of report.html"

[[backends]]
name = "cafe"
count = 3
profile = "latency=1ms"

[proxy]
[[proxy.listeners]]
name = "http"
[[proxy.upstreams]]
name = "cafe"
backends = "cafe"
next_upstream = ["off"]
[[proxy.routes]]
path = "/"
upstream = "cafe"

[[loads]]
name = "coffee"
url = "http://localhost/coffee"
rate = 400
connections = 8
duration = "4s"

[[actions]]
at = "1s"
reload = true

[[actions]]
at = "2s"
kill_backend = "cafe-1"
"#;

/// Chromium started for one test, killed with its whole process group when dropped.
struct Browser {
    child: Child,
    ws_port: u16,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test started (the browser leads it).
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

fn chromium() -> &'static str {
    for c in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(c).exists() {
            return c;
        }
    }
    panic!("no chromium: Debian's `chromium` package (make test-deps installs it)");
}

impl Browser {
    fn start(profile: &Path) -> Browser {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("chromium starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium printed its DevTools address");
        let port = url
            .trim_start_matches("ws://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Browser {
            child,
            ws_port: port,
        }
    }

    /// The DevTools websocket of the browser's first page.
    fn page_ws(&self) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.ws_port)).unwrap();
        write!(
            s,
            "GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.ws_port
        )
        .unwrap();
        // The answer's head, then exactly Content-Length bytes: the browser may keep the
        // connection open whatever the request asked.
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut r = BufReader::new(s);
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        let list: Value = serde_json::from_slice(&body).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page target")["webSocketDebuggerUrl"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// A DevTools protocol session on one page: commands with ids, events kept in order.
struct Cdp {
    ws: tungstenite::WebSocket<TcpStream>,
    next: u64,
    events: Vec<Value>,
}

impl Cdp {
    fn connect(url: &str) -> Cdp {
        let rest = url.trim_start_matches("ws://");
        let host = &rest[..rest.find('/').unwrap()];
        let stream = TcpStream::connect(host).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (ws, _) = tungstenite::client(url, stream).expect("websocket handshake");
        Cdp {
            ws,
            next: 0,
            events: Vec::new(),
        }
    }

    fn read(&mut self) -> Value {
        loop {
            match self.ws.read().expect("a DevTools message") {
                tungstenite::Message::Text(t) => return serde_json::from_str(&t).unwrap(),
                _ => continue,
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws
            .send(tungstenite::Message::Text(msg.to_string().into()))
            .unwrap();
        loop {
            let m = self.read();
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn wait_event(&mut self, method: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        if self.events.iter().any(|e| e["method"] == method) {
            return;
        }
        while Instant::now() < end {
            let m = self.read();
            let found = m["method"] == method;
            self.events.push(m);
            if found {
                return;
            }
        }
        panic!("no {method} within {timeout:?}");
    }

    /// Evaluates `expr` in the page and returns its value.
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }
}

fn run_scenario(root: &Path) -> PathBuf {
    let file = root.join("scenario.toml");
    fs::write(&file, SCENARIO).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("run")
        .arg(&file)
        .args(["--no-progress", "--results"])
        .arg(root.join("results"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let scn = root.join("results").join("html");
    fs::read_dir(scn).unwrap().flatten().next().unwrap().path()
}

#[test]
fn report_html_opens_offline_and_draws_every_chart_with_its_actions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_scenario(tmp.path());
    let data: model::RunResults =
        serde_json::from_str(&fs::read_to_string(dir.join("data.json")).unwrap()).unwrap();
    let html = dir.join("report.html");
    let bytes = fs::read_to_string(&html).unwrap();
    // Self-contained: no URL the browser would fetch.
    for needle in ["src=\"http", "href=\"http", "src=\"//", "@import", "url("] {
        assert!(!bytes.contains(needle), "report.html refers out: {needle}");
    }
    // `report DIR` rebuilds it byte for byte from data.json.
    fs::remove_file(&html).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_proxybench"))
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(fs::read_to_string(&html).unwrap(), bytes);

    let profile = tmp.path().join("chromium-profile");
    fs::create_dir_all(&profile).unwrap();
    let browser = Browser::start(&profile);
    let mut cdp = Cdp::connect(&browser.page_ws());
    for m in [
        "Runtime.enable",
        "Log.enable",
        "Page.enable",
        "Network.enable",
    ] {
        cdp.call(m, json!({}));
    }
    cdp.call(
        "Network.emulateNetworkConditions",
        json!({"offline": true, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}),
    );
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    );
    let url = format!("file://{}", html.display());
    cdp.call("Page.navigate", json!({"url": url}));
    cdp.wait_event("Page.loadEventFired", Duration::from_secs(30));
    assert_eq!(cdp.eval("window.pbReady === true"), json!(true));

    // Nothing fetched but the file itself.
    let fetched: Vec<String> = cdp
        .events
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
        .map(|e| {
            e["params"]["request"]["url"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert!(
        fetched
            .iter()
            .all(|u| u.starts_with("file://") || u.starts_with("data:")),
        "{fetched:?}"
    );

    // Every chart drawn, with its series.
    let charts = cdp.eval("JSON.stringify(window.pbCharts)");
    let charts: Vec<Value> = serde_json::from_str(charts.as_str().unwrap()).unwrap();
    let case = &data.cases[0];
    let load = &case.loads[0];
    // report.md's charts of the load (throughput, latency, failures: a backend was killed),
    // CPU and memory per process group, the status page, reloads; readiness per replica.
    let kinds: Vec<&str> = charts.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    for k in [
        "throughput",
        "latency",
        "errors",
        "cpu",
        "memory",
        "reloads",
        "readiness",
    ] {
        assert!(kinds.contains(&k), "no {k} chart: {kinds:?}");
    }
    for c in &charts {
        assert!(c["drawn"].as_u64().unwrap() >= 1, "not drawn: {c}");
        assert_eq!(c["series"], c["uplotSeries"], "{c}");
        assert!(c["series"].as_u64().unwrap() >= 1, "{c}");
    }
    let latency = charts.iter().find(|c| c["kind"] == "latency").unwrap();
    assert_eq!(latency["series"], 4, "p50, p90, p99, max: {latency}");
    let procs: std::collections::BTreeSet<&str> =
        case.proc_samples.iter().map(|s| s.group.as_str()).collect();
    let cpu = charts.iter().find(|c| c["kind"] == "cpu").unwrap();
    assert_eq!(
        cpu["series"].as_u64().unwrap() as usize,
        procs.len(),
        "{cpu}"
    );

    // Every series is on the canvas: pixels of its colour in the plot.
    let painted = cdp.eval(
        r##"JSON.stringify(window.pbCharts.map(function (c) {
            var cv = document.querySelector("#chart-" + CSS.escape(c.id) + " canvas");
            var d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
            var data = JSON.parse(document.getElementById("pb-data").textContent)
                .charts.filter(function (x) { return x.id === c.id; })[0];
            return data.series.map(function (s) {
                var r = parseInt(s.color.substr(1, 2), 16), g = parseInt(s.color.substr(3, 2), 16),
                    b = parseInt(s.color.substr(5, 2), 16), n = 0;
                for (var i = 0; i < d.length; i += 4) {
                    if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60 && d[i + 3] > 200) n++;
                }
                return n;
            });
        }))"##,
    );
    let painted: Vec<Vec<u64>> = serde_json::from_str(painted.as_str().unwrap()).unwrap();
    for (c, px) in charts.iter().zip(&painted) {
        assert!(px.iter().sum::<u64>() > 10, "{}: {px:?}", c["id"]);
    }
    let thr = charts
        .iter()
        .position(|c| c["kind"] == "throughput")
        .unwrap();
    assert!(painted[thr][0] > 50, "the 2xx line: {:?}", painted[thr]);

    // Each action marked at the time the run recorded, and a dashed line drawn there.
    let marks = charts[thr]["markers"].as_array().unwrap();
    assert_eq!(marks.len(), case.events.len(), "{marks:?}");
    for (m, e) in marks.iter().zip(&case.events) {
        assert_eq!(m["t"].as_f64().unwrap(), e.t_s);
        assert_eq!(m["action"], e.action.as_str());
        let dark = cdp.eval(&format!(
            r##"(function () {{
                var cv = document.querySelector("#chart-" + CSS.escape({id}) + " canvas");
                var d = cv.getContext("2d").getImageData({x}, 0, 1, cv.height).data, n = 0;
                for (var i = 0; i < d.length; i += 4)
                    if (d[i] < 110 && d[i + 1] < 110 && d[i + 2] < 110 && d[i + 3] > 200) n++;
                return n;
            }})()"##,
            id = charts[thr]["id"],
            x = m["x"]
        ));
        assert!(dark.as_u64().unwrap() > 40, "no marker line at {m}: {dark}");
    }
    // The killed backend's failures are shaded on the load's charts.
    assert!(load.failures() > 0, "the kill should fail requests");
    assert!(
        charts[thr]["shaded"].as_u64().unwrap() >= 1,
        "{}",
        charts[thr]
    );

    // No console error, no exception.
    let errors: Vec<&Value> = cdp
        .events
        .iter()
        .filter(|e| {
            e["method"] == "Runtime.exceptionThrown"
                || (e["method"] == "Runtime.consoleAPICalled" && e["params"]["type"] == "error")
                || (e["method"] == "Log.entryAdded" && e["params"]["entry"]["level"] == "error")
        })
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    // A screenshot of the whole page, for the reader.
    let h = cdp
        .eval("document.documentElement.scrollHeight")
        .as_u64()
        .unwrap();
    let shot = cdp.call(
        "Page.captureScreenshot",
        json!({"format": "png", "captureBeyondViewport": true,
               "clip": {"x": 0, "y": 0, "width": 1280, "height": h.min(1800), "scale": 1}}),
    );
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000,
        "{}",
        png.len()
    );
    fs::write(tmp.path().join("report-html.png"), &png).unwrap();
    if let Ok(keep) = std::env::var("PROXYBENCH_SCREENSHOT") {
        fs::write(keep, &png).unwrap();
    }
    // Every linear axis starts at zero (the tea chart's 199 to 201 r/s once filled its whole
    // height): a rate or count never looks like an outage for a 1% wobble.
    let y_min = cdp.eval(
        r##"JSON.stringify(window.pbPlots.map(function (u, i) {
            var id = window.pbCharts[i].id;
            var d = JSON.parse(document.getElementById("pb-data").textContent)
                .charts.filter(function (x) { return x.id === id; })[0];
            return [id, d.log ? null : u.scales.y.min];
        }))"##,
    );
    let y_min: Vec<(String, Option<f64>)> = serde_json::from_str(y_min.as_str().unwrap()).unwrap();
    assert!(!y_min.is_empty());
    for (id, min) in &y_min {
        assert!(
            min.is_none_or(|m| m <= 0.0),
            "{id}: its y axis starts at {min:?}"
        );
    }
    assert!(y_min.iter().any(|(_, m)| *m == Some(0.0)), "{y_min:?}");
    // Zoom: a chart's time axis set to one second of the run, as a drag across it does.
    let zoomed = cdp.eval(&format!(
        "(function () {{ var u = window.pbPlots[{thr}]; u.setScale('x', {{min: 1, max: 2}}); \
         return new Promise(function (ok) {{ setTimeout(function () {{ \
         ok([u.scales.x.min, u.scales.x.max]); }}, 100); }}); }})()"
    ));
    assert_eq!(zoomed, json!([1, 2]));

    drop(cdp);
    drop(browser);
}
