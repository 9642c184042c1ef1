"""`--web.config.file`: exporter-toolkit's web configuration (TLS and basic auth), as
uwsgi_exporter and every Prometheus exporter read it.

```yaml
tls_server_config:
  cert_file: server.crt          # relative paths are relative to this file
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert   # or NoClientCert, VerifyClientCertIfGiven
  client_ca_file: ca.crt
  min_version: TLS12             # TLS10 ... TLS13; max_version likewise
http_server_config:
  headers: {X-Frame-Options: deny}
basic_auth_users:
  prometheus: $2y$10$...         # bcrypt hashes: htpasswd -nBC 10 "" | tr -d ':\\n'
```

YAML is read by PyYAML and hashes are checked by the `bcrypt` package. The file is checked
whole: every problem is one line (`key: reason; the fix`), and `config check` reports them
all. Keys of the toolkit that uwsgitune does not implement (ciphers, curves, SAN lists,
inline PEM, rate limits, the two client-auth types that skip verification) are refused by
name rather than ignored: a security setting that silently does nothing is worse than none.
For the same reason a `client_ca_file` without a `client_auth_type` that verifies is refused,
as exporter-toolkit refuses it: the CA would be loaded and no client certificate asked for,
while the operator believes mTLS is on. Header values are printable ASCII, so that every
answer can be written and none can be split.
A bcrypt cost above 12 is refused too: every check, a wrong password's included, would
hold the one password-check thread (`auth.py`) for most of a second or more.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from uwsgitune.errors import ConfigError

VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file",
            "min_version", "max_version"}  # fmt: skip
UNSUPPORTED = {"cert", "key", "client_ca", "cipher_suites", "curve_preferences",
               "client_allowed_sans", "prefer_server_cipher_suites", "rate_limit"}  # fmt: skip
# bcrypt's cost: each step doubles the work of a check (~80 ms of CPU at 10, ~0.3 s at 12);
# above 12 a handful of wrong passwords would hold the one check thread for seconds each.
MAX_COST = 12
HEADERS = {"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options",
           "X-XSS-Protection", "Strict-Transport-Security"}  # fmt: skip


@dataclass(frozen=True)
class WebConfig:
    """A checked web config. `tls` is None for plain HTTP; `users` maps name -> bcrypt hash."""

    path: Path | None = None
    tls: ssl.SSLContext | None = None
    client_auth: str = "NoClientCert"
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def load_web_config(path: Path) -> WebConfig:
    """Read and check `path`. Raises ConfigError with one line per problem."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError([f"cannot read: {exc.strerror or exc}"], source=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError(["not UTF-8 text"], source=str(path)) from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise ConfigError([f"invalid YAML{line}: {problem}"], source=str(path)) from None
    problems: list[str] = []
    config = _check(data if data is not None else {}, path, problems)
    if problems or config is None:
        raise ConfigError(problems or ["invalid web config"], source=str(path))
    return config


def _check(data: object, path: Path, problems: list[str]) -> WebConfig | None:
    if not isinstance(data, dict):
        problems.append("the document must be a mapping (tls_server_config, basic_auth_users)")
        return None
    for key in data:
        if key not in ("tls_server_config", "http_server_config", "basic_auth_users"):
            why = "not supported by uwsgitune" if key in UNSUPPORTED else "unknown key (a typo?)"
            problems.append(f"{key}: {why}; remove it")
    users = _users(data.get("basic_auth_users"), problems)
    headers = _headers(data.get("http_server_config"), problems)
    tls_data = data.get("tls_server_config")
    tls, auth = None, "NoClientCert"
    if tls_data is not None:
        tls, auth = _tls(tls_data, path.parent, problems)
    return WebConfig(path, tls, auth, users, headers)


def _users(value: object, problems: list[str]) -> dict[str, bytes]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append("basic_auth_users: must map user names to bcrypt hashes")
        return {}
    users = {}
    for name, hashed in value.items():
        text = str(hashed) if hashed is not None else ""
        cost = _cost(text)
        if cost is None:
            problems.append(
                f"basic_auth_users.{name}: not a bcrypt hash; make one with "
                "htpasswd -nBC 10 \"\" | tr -d ':\\n'"
            )
            continue
        if cost > MAX_COST:
            problems.append(
                f"basic_auth_users.{name}: bcrypt cost {cost} is above {MAX_COST} (each "
                f"password check, a wrong one too, would take about {2 ** (cost - 10) / 10:g} s "
                f"of CPU); hash the password again with cost 10: htpasswd -nbBC 10 {name} "
                f'PASSWORD (the part after "{name}:"), or python3 -c \'import bcrypt; '
                'print(bcrypt.hashpw(b"PASSWORD", bcrypt.gensalt(rounds=10)).decode())\''
            )
            continue
        users[str(name)] = text.encode("ascii", "replace")
    return users


def _cost(text: str) -> int | None:
    """A bcrypt hash's cost ($2b$10$...: 10), None if `text` is not such a hash."""
    if not text.startswith(("$2a$", "$2b$", "$2y$")) or len(text) != 60 or text[6] != "$":
        return None
    digits = text[4:6]
    return int(digits) if digits.isdigit() and 4 <= int(digits) <= 31 else None


def _headers(value: object, problems: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append("http_server_config: must be a mapping")
        return {}
    out: dict[str, str] = {}
    for key, item in value.items():
        if key == "http2":
            continue  # accepted: uwsgitune answers HTTP/1.1, which every scraper speaks
        if key != "headers" or not isinstance(item, dict):
            problems.append(f"http_server_config.{key}: not supported; remove it")
            continue
        for name, text in item.items():
            if name not in HEADERS:
                problems.append(
                    f"http_server_config.headers.{name}: not an allowed header; "
                    f"use one of {', '.join(sorted(HEADERS))}"
                )
            elif not isinstance(text, str) or not _printable(text):
                problems.append(
                    f"http_server_config.headers.{name}: the value must be printable ASCII "
                    "(no control characters, no non-ASCII letters, no space at either end); "
                    "fix the value"
                )
            elif text:
                out[str(name)] = text
    return out


def _printable(value: str) -> bool:
    """A header value every client reads the same: printable ASCII (0x20-0x7e), no space
    at either end. A CR or LF would split the answer; a non-Latin-1 letter cannot be
    written at all, and failed every answer (`/-/healthy` too) until this check."""
    return all(" " <= c <= "~" for c in value) and value == value.strip(" ")


def _tls(data: object, base: Path, problems: list[str]) -> tuple[ssl.SSLContext | None, str]:
    if not isinstance(data, dict):
        problems.append("tls_server_config: must be a mapping with cert_file and key_file")
        return None, "NoClientCert"
    before = len(problems)
    for key in data:
        if key not in TLS_KEYS:
            why = "not supported by uwsgitune" if key in UNSUPPORTED else "unknown key (a typo?)"
            problems.append(f"tls_server_config.{key}: {why}; remove it")
    files = {k: _file(data, k, base, problems) for k in ("cert_file", "key_file", "client_ca_file")}
    auth = str(data.get("client_auth_type", "NoClientCert"))
    if auth not in CLIENT_AUTH:
        problems.append(
            f"tls_server_config.client_auth_type: {auth!r} is not supported; use "
            "RequireAndVerifyClientCert, VerifyClientCertIfGiven or NoClientCert"
        )
    elif auth != "NoClientCert" and "client_ca_file" not in data:
        problems.append(f"tls_server_config.client_ca_file: required by {auth}")
    elif auth == "NoClientCert" and "client_ca_file" in data:
        problems.append(
            "tls_server_config.client_ca_file: given without a client_auth_type that verifies, "
            "so no client certificate would be asked for; set client_auth_type to "
            "RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove client_ca_file"
        )
    versions = [_version(data, k, problems) for k in ("min_version", "max_version")]
    if len(problems) > before or files["cert_file"] is None or files["key_file"] is None:
        return None, auth
    return _context(files, auth, versions, problems), auth


def _file(data: dict[str, Any], key: str, base: Path, problems: list[str]) -> Path | None:
    value = data.get(key)
    if value is None:
        if key != "client_ca_file":
            problems.append(f"tls_server_config.{key}: required when TLS is configured")
        return None
    path = base / str(value)
    if not path.is_file():
        problems.append(f"tls_server_config.{key}: no such file {str(path)!r}")
        return None
    return path


def _version(data: dict[str, Any], key: str, problems: list[str]) -> ssl.TLSVersion | None:
    value = data.get(key)
    if value is None:
        return None
    if str(value) not in VERSIONS:
        problems.append(f"tls_server_config.{key}: {value!r}; use one of {', '.join(VERSIONS)}")
        return None
    return VERSIONS[str(value)]


def _context(
    files: dict[str, Path | None],
    auth: str,
    versions: list[ssl.TLSVersion | None],
    problems: list[str],
) -> ssl.SSLContext | None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = versions[0] or ssl.TLSVersion.TLSv1_2  # the toolkit's default
    if versions[1] is not None:
        ctx.maximum_version = versions[1]
    try:
        ctx.load_cert_chain(str(files["cert_file"]), str(files["key_file"]))
    except (ssl.SSLError, OSError) as exc:
        problems.append(f"tls_server_config: cert_file and key_file do not load: {_why(exc)}")
        return None
    if files["client_ca_file"] is not None:
        try:
            ctx.load_verify_locations(cafile=str(files["client_ca_file"]))
        except (ssl.SSLError, OSError) as exc:
            problems.append(f"tls_server_config.client_ca_file: does not load: {_why(exc)}")
            return None
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def _why(exc: Exception) -> str:
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)
