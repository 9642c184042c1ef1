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

YAML is read by PyYAML, the document is a pydantic model (`WebConfig`), as the daemon's
config is, and hashes are checked by the `bcrypt` package. The file is checked whole: every
problem is one line (`key: reason; the fix`), and `config check` reports them all. The rules
the validators hold:
- Keys of the toolkit that uwsgitune does not implement (ciphers, curves, SAN lists, inline
  PEM, rate limits, the two client-auth types that skip verification) are refused by name
  rather than ignored: a security setting that silently does nothing is worse than none.
- For the same reason a `client_ca_file` without a `client_auth_type` that verifies is
  refused, as exporter-toolkit refuses it: the CA would be loaded and no client certificate
  asked for, while the operator believes mTLS is on.
- Files must exist and load (the certificate with its key, the CA); TLS 1.2 is the minimum
  version unless `min_version` says otherwise.
- Header values are printable ASCII, so that every answer can be written and none can be
  split, and only the headers exporter-toolkit allows may be set.
- A bcrypt cost above 12 is refused: every check, a wrong password's included, would hold
  the one password-check thread (`auth.py`) for most of a second or more.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

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
UNSUPPORTED = {
    "cert",
    "key",
    "client_ca",
    "cipher_suites",
    "curve_preferences",
    "client_allowed_sans",
    "prefer_server_cipher_suites",
    "rate_limit",
}
# bcrypt's cost: each step doubles the work of a check (~80 ms of CPU at 10, ~0.3 s at 12);
# above 12 a handful of wrong passwords would hold the one check thread for seconds each.
MAX_COST = 12
HEADERS = {
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
}
HTPASSWD = "htpasswd -nBC 10 \"\" | tr -d ':\\n'"
# What a value of the wrong shape at a key is told (a mapping expected).
SHAPES = {
    "": "the document must be a mapping (tls_server_config, basic_auth_users)",
    "tls_server_config": "must be a mapping with cert_file and key_file",
    "http_server_config": "must be a mapping",
    "http_server_config.headers": "not supported; remove it",
    "basic_auth_users": "must map user names to bcrypt hashes",
}


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# TLS -------------------------------------------------------------------------------------------


def _file(value: object, info: ValidationInfo) -> Path:
    """A file named in the web config, relative to the config's directory."""
    base = (info.context or {}).get("base", Path())
    path = Path(base) / str(value)
    if not path.is_file():
        raise ValueError(f"no such file {str(path)!r}")
    return path


def _client_auth(value: object) -> str:
    if str(value) not in CLIENT_AUTH:
        raise ValueError(
            f"{str(value)!r} is not supported; use RequireAndVerifyClientCert, "
            "VerifyClientCertIfGiven or NoClientCert"
        )
    return str(value)


def _version(value: object) -> str:
    if str(value) not in VERSIONS:
        raise ValueError(f"{value!r}; use one of {', '.join(VERSIONS)}")
    return str(value)


def _why(exc: Exception) -> str:
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)


class TLSServerConfig(_Strict):
    """`tls_server_config`; `context` is the server's TLS context, built once it checked."""

    cert_file: Annotated[Path, BeforeValidator(_file)]
    key_file: Annotated[Path, BeforeValidator(_file)]
    client_auth_type: Annotated[str, BeforeValidator(_client_auth)] = "NoClientCert"
    client_ca_file: Path | None = Field(None, validate_default=True)
    min_version: Annotated[str, BeforeValidator(_version)] | None = None
    max_version: Annotated[str, BeforeValidator(_version)] | None = None
    _context: ssl.SSLContext | None = PrivateAttr(None)

    @field_validator("client_ca_file", mode="before")
    @classmethod
    def _client_ca(cls, value: object, info: ValidationInfo) -> Path | None:
        """Given exactly when the client auth type verifies (it is not checked against an
        auth type that was refused), and a CA file that loads."""
        auth = info.data.get("client_auth_type")
        if auth not in (None, "NoClientCert") and value is None:
            raise ValueError(f"required by {auth}")
        if auth == "NoClientCert" and value is not None:
            raise ValueError(
                "given without a client_auth_type that verifies, so no client certificate "
                "would be asked for; set client_auth_type to RequireAndVerifyClientCert (or "
                "VerifyClientCertIfGiven), or remove client_ca_file"
            )
        if value is None:
            return None
        path = _file(value, info)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cafile=str(path))
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"does not load: {_why(exc)}") from None
        return path

    @model_validator(mode="after")
    def _load(self) -> TLSServerConfig:
        """The certificate and its key load together (a key of another certificate fails)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        low = VERSIONS[self.min_version] if self.min_version else ssl.TLSVersion.TLSv1_2
        ctx.minimum_version = low  # the toolkit's default: TLS 1.2
        if self.max_version is not None:
            ctx.maximum_version = VERSIONS[self.max_version]
        try:
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"cert_file and key_file do not load: {_why(exc)}") from None
        if self.client_ca_file is not None:  # loaded once already, by its own check
            try:
                ctx.load_verify_locations(cafile=str(self.client_ca_file))
            except (ssl.SSLError, OSError) as exc:
                raise ValueError(f"client_ca_file does not load: {_why(exc)}") from None
        ctx.verify_mode = CLIENT_AUTH[self.client_auth_type]
        self._context = ctx
        return self

    @property
    def context(self) -> ssl.SSLContext:
        assert self._context is not None  # set by the validator that checked the files
        return self._context


# Headers and users: each entry with its name -------------------------------------------------


def _named(value: object) -> object:
    """A mapping's entries as {name, value} pairs, so that an entry's check knows its name
    (a fix that spells the user out; a header whose name is refused has no value to check)."""
    if not isinstance(value, dict):
        return value
    return {str(k): {"name": str(k), "value": v} for k, v in value.items()}


def _printable(value: object) -> bool:
    """A header value every client reads the same: printable ASCII (0x20-0x7e), no space
    at either end. A CR or LF would split the answer; a non-Latin-1 letter cannot be
    written at all, and failed every answer (`/-/healthy` too) until this check."""
    return (
        isinstance(value, str) and all(" " <= c <= "~" for c in value) and value == value.strip(" ")
    )


class Header(_Strict):
    """One of `http_server_config.headers`: a header exporter-toolkit allows, its value."""

    name: str
    value: Any

    @model_validator(mode="after")
    def _allowed(self) -> Header:
        if self.name not in HEADERS:
            raise ValueError(f"not an allowed header; use one of {', '.join(sorted(HEADERS))}")
        if not _printable(self.value):
            raise ValueError(
                "the value must be printable ASCII (no control characters, no non-ASCII "
                "letters, no space at either end); fix the value"
            )
        return self


class HTTPServerConfig(_Strict):
    """`http_server_config`: the headers every answer carries. `http2` is accepted and
    ignored: uwsgitune answers HTTP/1.1, which every scraper speaks."""

    headers: Annotated[dict[str, Header], BeforeValidator(_named)] = {}
    http2: Any = None


def _cost(text: str) -> int | None:
    """A bcrypt hash's cost ($2b$10$...: 10), None if `text` is not such a hash."""
    if not text.startswith(("$2a$", "$2b$", "$2y$")) or len(text) != 60 or text[6] != "$":
        return None
    digits = text[4:6]
    return int(digits) if digits.isdigit() and 4 <= int(digits) <= 31 else None


class BcryptUser(_Strict):
    """One of `basic_auth_users`: a user's name and bcrypt hash (`value`)."""

    name: str
    value: Any

    @model_validator(mode="after")
    def _bcrypt(self) -> BcryptUser:
        text = str(self.value) if self.value is not None else ""
        cost = _cost(text)
        if cost is None:
            raise ValueError(f"not a bcrypt hash; make one with {HTPASSWD}")
        if cost > MAX_COST:
            name = self.name
            raise ValueError(
                f"bcrypt cost {cost} is above {MAX_COST} (each password check, a wrong one too, "
                f"would take about {2 ** (cost - 10) / 10:g} s of CPU); hash the password again "
                f"with cost 10: htpasswd -nbBC 10 {name} PASSWORD (the part after "
                f'"{name}:"), or python3 -c \'import bcrypt; '
                'print(bcrypt.hashpw(b"PASSWORD", bcrypt.gensalt(rounds=10)).decode())\''
            )
        return self

    @property
    def hashed(self) -> bytes:
        return str(self.value).encode("ascii", "replace")


# The file ---------------------------------------------------------------------------------------


class WebConfig(_Strict):
    """A checked web config. `tls` is None for plain HTTP; `users` maps name -> bcrypt hash."""

    basic_auth_users: Annotated[dict[str, BcryptUser] | None, BeforeValidator(_named)] = None
    http_server_config: HTTPServerConfig | None = None
    tls_server_config: TLSServerConfig | None = None

    @property
    def tls(self) -> ssl.SSLContext | None:
        return None if self.tls_server_config is None else self.tls_server_config.context

    @property
    def users(self) -> dict[str, bytes]:
        return {n: u.hashed for n, u in (self.basic_auth_users or {}).items()}

    @property
    def headers(self) -> dict[str, str]:
        """The headers to send (an empty value sends none)."""
        config = self.http_server_config
        return {k: h.value for k, h in (config.headers if config else {}).items() if h.value}


def _problem(err: ErrorDetails) -> str:
    """One line for one of pydantic's errors: where, what, and the fix."""
    loc = [str(part) for part in err["loc"] if part != "[key]"]
    where = ".".join(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        if loc[0] == "http_server_config":
            return f"{where}: not supported; remove it"
        why = "not supported by uwsgitune" if loc[-1] in UNSUPPORTED else "unknown key (a typo?)"
        return f"{where}: {why}; remove it"
    if kind == "missing":
        return f"{where}: required when TLS is configured"
    if kind in ("model_type", "dict_type") and where in SHAPES:
        return f"{where}: {SHAPES[where]}" if where else SHAPES[where]
    message = err["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


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
    try:
        context = {"base": path.parent}
        return WebConfig.model_validate(data if data is not None else {}, context=context)
    except ValidationError as exc:
        problems = [_problem(err) for err in exc.errors(include_url=False)]
        raise ConfigError(problems, source=str(path)) from None
