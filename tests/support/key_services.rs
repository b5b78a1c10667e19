//! Real key tools and services for the SOPS tests, all on loopback and gone with the test:
//! GnuPG in a throwaway home, `moto_server` (AWS KMS and STS) and `bao server -dev` (Vault
//! transit) from the project's venv (`make setup`), and a small HTTP server for the Google
//! and Azure endpoints, whose requests a test inspects.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::process::Supervised;
use super::{free_port, repo_root};

/// A GnuPG home of its own, with the keys a test imports, and its own gpg-agent.
pub struct Gpg {
    /// Started here in the foreground rather than by gpg, which would daemonize it beyond
    /// the reach of the test's process supervision.
    _agent: Supervised,
    home: tempfile::TempDir,
}

impl Gpg {
    pub fn new() -> Gpg {
        // Short: gpg-agent's socket path must fit in a Unix socket address.
        let home = tempfile::Builder::new()
            .prefix("gpg")
            .tempdir_in("/tmp")
            .unwrap();
        let agent = Supervised::spawn(
            Command::new("gpg-agent")
                .arg("--homedir")
                .arg(home.path())
                .args(["--daemon", "--no-detach", "--quiet"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .expect("gpg-agent runs (Debian's gnupg)");
        let socket = home.path().join("S.gpg-agent");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "gpg-agent did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Gpg {
            _agent: agent,
            home,
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new("gpg");
        command.arg("--homedir").arg(self.home.path()).args([
            "--batch",
            "--yes",
            "--quiet",
            "--no-autostart",
            "--trust-model",
            "always",
        ]);
        command
    }

    /// Runs gpg with `input` on stdin; its stdout, or a panic with its stderr.
    pub fn run(&self, args: &[&str], input: &[u8]) -> Vec<u8> {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpg runs (Debian's gnupg)");
        child.stdin.take().unwrap().write_all(input).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "gpg {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    pub fn import(&self, key: &Path) {
        self.run(&["--import", key.to_str().unwrap()], b"");
    }

    /// The plaintext of an armored message.
    pub fn decrypt(&self, armored: &str) -> Vec<u8> {
        self.run(&["--decrypt"], armored.as_bytes())
    }

    /// `data` encrypted to `recipient`, armored.
    pub fn encrypt(&self, recipient: &str, data: &[u8]) -> String {
        String::from_utf8(self.run(&["--armor", "--encrypt", "-r", recipient], data)).unwrap()
    }

    /// One secret key, armored, as a decryption Secret's `*.asc` entry holds it.
    pub fn export_secret_key(&self, fingerprint: &str) -> Vec<u8> {
        self.run(&["--armor", "--export-secret-keys", fingerprint], b"")
    }
}

/// A server process from the project's venv, killed when dropped or when the test process
/// ends (`process::Supervised`).
pub struct Server {
    _process: Supervised,
    pub url: String,
    _dir: tempfile::TempDir,
}

fn venv_tool(name: &str) -> PathBuf {
    let path = repo_root().join("target/venv/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: `make setup` installs it into the project's venv",
        path.display()
    );
    path
}

/// Waits (at most 60 s) until `port` accepts connections.
fn wait_for_port(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} did not listen on 127.0.0.1:{port} within 60 s");
}

/// `moto_server`: AWS KMS and STS on loopback.
pub fn moto() -> Server {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut process = Supervised::spawn(
        Command::new(venv_tool("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("moto_server starts");
    wait_for_port(port, process.child(), "moto_server");
    Server {
        _process: process,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

/// `bao server -dev` with the root token `root`.
pub fn openbao() -> Server {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut process = Supervised::spawn(
        Command::new(venv_tool("bao"))
            .args([
                "server",
                "-dev",
                "-dev-root-token-id=root",
                &format!("-dev-listen-address=127.0.0.1:{port}"),
            ])
            .env("HOME", dir.path())
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("bao starts");
    wait_for_port(port, process.child(), "bao server -dev");
    Server {
        _process: process,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

impl Server {
    /// `plaintext` encrypted by a new transit key `key` of a transit engine mounted at
    /// `mount`: Vault's ciphertext (`vault:v1:…`), as sops stores it. Blocking.
    pub fn transit_encrypt(&self, mount: &str, key: &str, plaintext: &[u8]) -> String {
        transit_encrypt(&self.url, mount, key, plaintext)
    }
}

/// Vault's HTTP API at `url` as the root token, for setting a dev server up. Blocking.
pub fn vault_call(url: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let answer = kustomize_controller::tls::blocking_client_builder()
        .build()
        .unwrap()
        .post(format!("{url}/v1/{path}"))
        .header("X-Vault-Token", "root")
        .json(&body)
        .send()
        .unwrap();
    let status = answer.status();
    let text = answer.text().unwrap();
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// See [`Server::transit_encrypt`]; for a server known by its URL.
pub fn transit_encrypt(url: &str, mount: &str, key: &str, plaintext: &[u8]) -> String {
    use base64::Engine;
    vault_call(
        url,
        &format!("sys/mounts/{mount}"),
        serde_json::json!({"type": "transit"}),
    );
    vault_call(url, &format!("{mount}/keys/{key}"), serde_json::json!({}));
    let plaintext = base64::engine::general_purpose::STANDARD.encode(plaintext);
    vault_call(
        url,
        &format!("{mount}/encrypt/{key}"),
        serde_json::json!({ "plaintext": plaintext }),
    )["data"]["ciphertext"]
        .as_str()
        .expect("a transit ciphertext")
        .to_string()
}

/// A request the mock server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The body's `application/x-www-form-urlencoded` fields.
    pub fn form(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }

    pub fn form_field(&self, name: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

/// A status, a content type and a body.
type Reply = (u16, &'static str, String);
type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A plain HTTP/1.1 server on loopback answering JSON with `handler`; every request is kept
/// for the test to check. It stops when dropped.
pub struct MockServer {
    pub url: String,
    /// The CA its certificate is checked against, for a TLS server ([`MockServer::start_tls`]).
    pub ca_pem: Option<String>,
    pub requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockServer {
    pub fn start(
        handler: impl Fn(&Request) -> (u16, serde_json::Value) + Send + Sync + 'static,
    ) -> MockServer {
        MockServer::start_replying(move |request| {
            let (status, json) = handler(request);
            (status, "application/json", json.to_string())
        })
    }

    /// A server answering plain text (IMDS, STS's XML).
    pub fn start_text(
        handler: impl Fn(&Request) -> (u16, String) + Send + Sync + 'static,
    ) -> MockServer {
        MockServer::start_replying(move |request| {
            let (status, text) = handler(request);
            (status, "text/plain", text)
        })
    }

    /// A server answering JSON over TLS (https://127.0.0.1), with a certificate of a CA of
    /// its own ([`MockServer::ca_pem`]).
    pub fn start_tls(
        handler: impl Fn(&Request) -> (u16, serde_json::Value) + Send + Sync + 'static,
    ) -> MockServer {
        let pki = super::pki::pki().expect("test certificates");
        let config = pki.server_config();
        let mut server = MockServer::start_with(
            move |request| {
                let (status, json) = handler(request);
                (status, "application/json", json.to_string())
            },
            Some(Arc::new(config)),
        );
        server.ca_pem = Some(pki.ca);
        server
    }

    fn start_replying(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> MockServer {
        MockServer::start_with(handler, None)
    }

    fn start_with(
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
        tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let thread = {
            let (requests, stop) = (requests.clone(), stop.clone());
            std::thread::spawn(move || {
                // Bounded: a test that forgets to drop the server still ends it in 5 minutes.
                let deadline = Instant::now() + Duration::from_secs(300);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            stream.set_nonblocking(false).unwrap();
                            stream
                                .set_read_timeout(Some(Duration::from_secs(10)))
                                .unwrap();
                            match &tls {
                                None => serve(stream, &*handler, &requests),
                                Some(config) => {
                                    let Ok(connection) =
                                        tokio_rustls::rustls::ServerConnection::new(config.clone())
                                    else {
                                        continue;
                                    };
                                    let stream =
                                        tokio_rustls::rustls::StreamOwned::new(connection, stream);
                                    serve(stream, &*handler, &requests);
                                }
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        MockServer {
            url,
            ca_pem: None,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(stream: impl Read + Write, handler: &Handler, requests: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length.min(1 << 20)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request = Request {
        method,
        path,
        headers,
        body,
    };
    let (status, content_type, body) = handler(&request);
    requests.lock().unwrap().push(request);
    let stream = reader.get_mut();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}
