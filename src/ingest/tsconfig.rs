//! Where the specifier of a TypeScript or JavaScript import leads: a
//! relative one (`./a`, `../b.js`) from the importing file's directory, any
//! other through the `paths` and `baseUrl` of the nearest `tsconfig.json`
//! (or `jsconfig.json`) above the importing file, with those of the
//! configs it `extends`. A bare specifier they do not map (`react`) is a
//! package's, outside the tree.

use std::collections::BTreeMap;

/// The configs of a tree, by their path relative to the root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TsConfigs {
    configs: BTreeMap<String, TsConfig>,
}

/// What one config says about imports, paths made relative to the root.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TsConfig {
    /// The configs it extends (those in the tree), in order: later ones override.
    extends: Vec<String>,
    /// `compilerOptions.baseUrl`.
    base_url: Option<String>,
    /// `compilerOptions.paths`, as written: patterns with at most one `*`,
    /// and their targets (relative to the base URL, else to this config's directory).
    paths: Option<Vec<(String, Vec<String>)>>,
}

/// `compilerOptions.paths`: each pattern with its targets.
type Paths = [(String, Vec<String>)];

/// How deep `extends` chains are followed (a cycle ends there too).
const MAX_EXTENDS: usize = 8;

/// The extensions an import specifier may carry (ESM TypeScript writes
/// `./b.js` for `b.ts`), the longest first.
const EXTENSIONS: &[&str] = &[".d.ts", ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"];

impl TsConfigs {
    /// Reads one config (`relative` to the root); one that does not parse is left out.
    pub(super) fn add(&mut self, relative: &str, text: &str) {
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&lenient_json(text)) else { return };
        let dir = parent(relative);
        let extends = match &json["extends"] {
            serde_json::Value::String(s) => vec![s.as_str()],
            serde_json::Value::Array(a) => a.iter().filter_map(|s| s.as_str()).collect(),
            _ => Vec::new(),
        };
        let extends = extends
            .into_iter()
            .filter(|e| e.starts_with('.'))
            .filter_map(|e| join(dir, e))
            .map(|e| if e.ends_with(".json") { e } else { format!("{e}.json") })
            .collect();
        let options = &json["compilerOptions"];
        let base_url = options["baseUrl"].as_str().and_then(|b| join(dir, b));
        let paths = options["paths"].as_object().map(|paths| {
            paths
                .iter()
                .map(|(pattern, targets)| {
                    let targets = targets.as_array().into_iter().flatten().filter_map(|t| t.as_str());
                    (pattern.clone(), targets.map(str::to_owned).collect())
                })
                .collect()
        });
        self.configs.insert(relative.to_owned(), TsConfig { extends, base_url, paths });
    }

    /// The files (relative to the root, without extension) that `specifier`,
    /// imported by `file`, may name: one for a relative specifier, one per
    /// target of a `paths` pattern, or the one under `baseUrl`; none for
    /// a package outside the tree.
    pub(super) fn targets(&self, file: &str, specifier: &str) -> Vec<String> {
        let found =
            if specifier == "." || specifier == ".." || specifier.starts_with("./") || specifier.starts_with("../") {
                join(parent(file), specifier).into_iter().collect()
            } else if specifier.starts_with('/') {
                Vec::new()
            } else {
                self.mapped(file, specifier)
            };
        found.into_iter().map(|f| strip_extension(&f).to_owned()).collect()
    }

    /// A non-relative specifier through the nearest config's `paths`, else its `baseUrl`.
    fn mapped(&self, file: &str, specifier: &str) -> Vec<String> {
        let Some(config) = self.nearest(file) else { return Vec::new() };
        let base_url = self.base_url(config, 0);
        if let Some((defined_in, paths)) = self.paths(config, 0) {
            if let Some((targets, star)) = best_match(paths, specifier) {
                let base = base_url.unwrap_or_else(|| parent(defined_in));
                return targets.iter().filter_map(|t| join(base, &t.replacen('*', star, 1))).collect();
            }
        }
        base_url.and_then(|b| join(b, specifier)).into_iter().collect()
    }

    /// The config that governs `file`: the nearest above it.
    fn nearest(&self, file: &str) -> Option<&str> {
        let mut dir = parent(file);
        loop {
            for name in ["tsconfig.json", "jsconfig.json"] {
                let path = if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") };
                if let Some((key, _)) = self.configs.get_key_value(&path) {
                    return Some(key);
                }
            }
            if dir.is_empty() {
                return None;
            }
            dir = parent(dir);
        }
    }

    /// The `baseUrl` in force in `config`: its own, else the last extended one's.
    fn base_url(&self, config: &str, depth: usize) -> Option<&str> {
        let c = self.configs.get(config).filter(|_| depth < MAX_EXTENDS)?;
        c.base_url.as_deref().or_else(|| c.extends.iter().rev().find_map(|e| self.base_url(e, depth + 1)))
    }

    /// The `paths` in force in `config`, with the config that defines them.
    fn paths(&self, config: &str, depth: usize) -> Option<(&str, &Paths)> {
        let (key, c) = self.configs.get_key_value(config).filter(|_| depth < MAX_EXTENDS)?;
        match &c.paths {
            Some(p) => Some((key.as_str(), p.as_slice())),
            None => c.extends.iter().rev().find_map(|e| self.paths(e, depth + 1)),
        }
    }
}

/// The `paths` entry for `specifier`: an exact pattern, else the wildcard
/// pattern with the longest prefix; with what the `*` stands for.
fn best_match<'p, 's>(paths: &'p Paths, specifier: &'s str) -> Option<(&'p [String], &'s str)> {
    let mut best: Option<(usize, &[String], &str)> = None;
    for (pattern, targets) in paths {
        match pattern.split_once('*') {
            None if pattern == specifier => return Some((targets, "")),
            None => {}
            Some((prefix, suffix)) => {
                let fits = specifier.len() >= prefix.len() + suffix.len()
                    && specifier.starts_with(prefix)
                    && specifier.ends_with(suffix);
                if fits && best.is_none_or(|(len, _, _)| prefix.len() > len) {
                    best = Some((prefix.len(), targets, &specifier[prefix.len()..specifier.len() - suffix.len()]));
                }
            }
        }
    }
    best.map(|(_, targets, star)| (targets, star))
}

/// The directory of a path relative to the root (`""` for the root).
fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// `relative` (with `.` and `..`) from `dir`, relative to the root; none above it.
fn join(dir: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

fn strip_extension(path: &str) -> &str {
    EXTENSIONS.iter().find_map(|e| path.strip_suffix(e)).unwrap_or(path)
}

/// JSON with comments and trailing commas, as tsconfig.json allows, made
/// plain JSON: comments and the commas before a `}` or `]` are dropped.
fn lenient_json(text: &str) -> String {
    let text = text.trim_start_matches('\u{feff}');
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                while let Some(s) = chars.next() {
                    out.push(s);
                    match s {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => while chars.next_if(|&n| n != '\n').is_some() {},
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
                out.push(' ');
            }
            '}' | ']' => {
                // A trailing comma: the last non-blank character written.
                let kept = out.trim_end().len();
                if out[..kept].ends_with(',') {
                    out.truncate(kept - 1);
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsconfig_is_read_with_comments_and_trailing_commas() {
        let text = "\u{feff}{\n  // paths\n  \"compilerOptions\": { /* base */ \"baseUrl\": \"./src\", \"paths\": { \"@/*\": [\"app/*\",], \"a//b\": [\"x\"] }, },\n}";
        let json: serde_json::Value = serde_json::from_str(&lenient_json(text)).unwrap();
        assert_eq!(json["compilerOptions"]["baseUrl"], "./src");
        assert_eq!(json["compilerOptions"]["paths"]["a//b"][0], "x");
    }

    #[test]
    fn specifiers_lead_to_files() {
        let mut c = TsConfigs::default();
        c.add(
            "tsconfig.base.json",
            r#"{"compilerOptions": {"paths": {"@lib/*": ["libs/*/src"], "@core": ["libs/core/index.ts"]}}}"#,
        );
        c.add("tsconfig.json", r#"{"extends": "./tsconfig.base", "compilerOptions": {"baseUrl": "."}}"#);
        c.add("web/tsconfig.json", r#"{"compilerOptions": {"baseUrl": "src", "paths": {"~/*": ["*"]}}}"#);
        let t = |file: &str, spec: &str| c.targets(file, spec);
        assert_eq!(t("a/b.ts", "./c.js"), ["a/c"]);
        assert_eq!(t("a/b.ts", "../x/y"), ["x/y"]);
        assert_eq!(t("a/b.ts", ".."), [""]);
        assert!(t("b.ts", "../up").is_empty(), "above the root");
        // Through the root config, which extends the base (paths relative to the baseUrl).
        assert_eq!(t("a/b.ts", "@lib/ui"), ["libs/ui/src"]);
        assert_eq!(t("a/b.ts", "@core"), ["libs/core/index"]);
        assert_eq!(t("a/b.ts", "utils/dates"), ["utils/dates"], "under baseUrl");
        // The nearest config governs: web's own baseUrl and paths.
        assert_eq!(t("web/src/app.tsx", "~/ui/button"), ["web/src/ui/button"]);
        assert_eq!(t("web/src/app.tsx", "models/user"), ["web/src/models/user"]);
        let mut bare = TsConfigs::default();
        bare.add("tsconfig.json", r#"{"compilerOptions": {"strict": true}}"#);
        assert!(bare.targets("a.ts", "react").is_empty(), "a package, outside the tree");
    }

    #[test]
    fn the_longest_wildcard_prefix_wins() {
        let paths = vec![("@/*".to_owned(), vec!["a/*".to_owned()]), ("@/ui/*".to_owned(), vec!["b/*".to_owned()])];
        assert_eq!(best_match(&paths, "@/ui/x"), Some((&paths[1].1[..], "x")));
        assert_eq!(best_match(&paths, "@/y"), Some((&paths[0].1[..], "y")));
        assert_eq!(best_match(&paths, "z"), None);
    }
}
