//! A host name as a policy writes it (`[network] allow`, `--secret`,
//! discovered registries): checked and lower-cased. A leaf: the policy's
//! parts that read host names share it without reaching into each other.

/// `example.com`, `*.example.com`, either with `:PORT`. Lower-cased.
pub fn parse_host(s: &str) -> Result<(String, Option<u16>), (String, Option<String>)> {
    let bad = |why: String| {
        (
            format!(
                "invalid host `{s}`: {why}; expected a host name such as \"registry.npmjs.org\" or \"*.github.com:443\""
            ),
            None,
        )
    };
    if s.contains("://") {
        let rest = s.split_once("://").map_or(s, |(_, r)| r);
        let host = rest.split('/').next().unwrap_or(rest);
        return Err((
            format!("invalid host `{s}`: a URL; expected a host name"),
            Some(format!("write \"{host}\"")),
        ));
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => {
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad(format!("port `{p}` is not a number from 1 to 65535")))?;
            (h, Some(port))
        }
        None => (s, None),
    };
    let host = host.to_ascii_lowercase();
    if host == "*" {
        return Err((
            format!("invalid host `{s}`: `*` would allow every host"),
            Some("use [network] mode = \"host\" for unrestricted network".into()),
        ));
    }
    let name = host.strip_prefix("*.").unwrap_or(&host);
    if name.is_empty() || name.len() > 253 {
        return Err(bad("empty or longer than 253 characters".into()));
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(bad("empty label or label longer than 63 characters".into()));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad(format!("label `{label}` starts or ends with `-`")));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            let why = if c == '*' {
                "`*` is only allowed as a whole first label (`*.example.com`)".to_string()
            } else {
                format!("`{c}` is not allowed in a host name")
            };
            return Err(bad(why));
        }
    }
    Ok((host, port))
}
