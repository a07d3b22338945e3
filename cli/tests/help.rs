//! Every subcommand's `--help` describes each of its options with words of its own: no option
//! without a description, no two options of a command with the same one (a doc comment on the wrong
//! field shows as both).

mod common;
use common::hetla;

/// The lines of section `title` ("Options:", "Commands:") of a help text.
fn section<'h>(help: &'h str, title: &str) -> Vec<&'h str> {
    help.lines()
        .skip_while(|l| !l.starts_with(title))
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .collect()
}

/// Each option of a help text (its long name, or its short one) with its description, the
/// `[default: ..]` and `[possible values: ..]` notes left out.
fn options(help: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in section(help, "Options:") {
        let text = line.trim_start();
        let indent = line.len() - text.len();
        if indent <= 6 && text.starts_with('-') {
            // "-h, --help  Print help", "--n <N>  Order of the matrix", or the name alone
            // with the description on the lines below.
            let (signature, description) = text.split_once("  ").unwrap_or((text, ""));
            let name = signature
                .split([',', ' '])
                .rfind(|w| w.starts_with('-'))
                .unwrap_or(signature)
                .to_owned();
            out.push((name, description.trim().to_owned()));
        } else if let Some((_, description)) = out.last_mut()
            && !text.is_empty()
        {
            description.push(' ');
            description.push_str(text);
        }
    }
    for (_, description) in &mut out {
        for note in ["[default: ", "[possible values: ", "[aliases: "] {
            while let Some(start) = description.find(note) {
                let end = description[start..]
                    .find(']')
                    .map_or(description.len(), |e| start + e + 1);
                description.replace_range(start..end, "");
            }
        }
        *description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    out
}

#[test]
fn every_option_of_every_subcommand_has_its_own_description() {
    let (ok, help, err) = hetla(&["--help"]);
    assert!(ok, "{err}");
    let commands: Vec<String> = section(&help, "Commands:")
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect();
    assert!(
        [
            "cholesky",
            "simulate",
            "bound",
            "sweep",
            "calibrate",
            "gemm",
            "info"
        ]
        .iter()
        .all(|c| commands.iter().any(|k| k == c)),
        "{commands:?}"
    );
    for command in &commands {
        let (ok, help, err) = hetla(&[command, "--help"]);
        assert!(ok, "{command} --help: {err}");
        let options = options(&help);
        assert!(options.len() > 2, "{command}: {options:?}");
        for (i, (name, description)) in options.iter().enumerate() {
            assert!(
                description.len() > 3,
                "hetla {command} --help: {name} has no description:\n{help}"
            );
            if let Some((other, _)) = options[..i].iter().find(|(_, d)| d == description) {
                panic!(
                    "hetla {command} --help: {other} and {name} have the same description {description:?}"
                );
            }
        }
    }
}

#[test]
fn the_parser_of_this_test_finds_a_missing_description() {
    // The text `hetla bound --help` printed when `--json`'s doc comment sat on
    // `--precision`: the check above must refuse it.
    let broken = "Options:\n      --precision <PRECISION>  Print one JSON object on stdout instead of text. The precision [default: d]\n      --json\n  -h, --help                   Print help\n";
    let found = options(broken);
    assert_eq!(found.len(), 3);
    assert_eq!(found[1], ("--json".to_owned(), String::new()));
    assert_eq!(found[2].1, "Print help");
}

#[test]
fn every_option_of_every_subcommand_is_on_its_page_in_docs_cli() {
    let (_, help, _) = hetla(&["--help"]);
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli");
    for command in section(&help, "Commands:")
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
    {
        let page = docs.join(format!("{command}.md"));
        let text = std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("hetla {command} has no page {}: {e}", page.display()));
        let (ok, help, err) = hetla(&[command, "--help"]);
        assert!(ok, "{command} --help: {err}");
        for (name, _) in options(&help) {
            if name == "--help" {
                continue;
            }
            assert!(
                text.contains(&format!("`{name}")),
                "hetla {command} {name} is not documented on {} (run scripts/cli-docs.py)",
                page.display()
            );
        }
    }
}

#[test]
fn on_off_flags_turn_on_alone_as_every_other_does() {
    // `--huge-pages` once needed a value where `--resident` and `--compare` take none.
    // The report says whether the matrix is in huge pages: where the kernel offers them.
    let offered = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"));
    let on = common::json("cholesky --n 1024 --tile 256 --huge-pages");
    assert_eq!(on["huge_pages"], offered);
    let off = common::json("cholesky --n 1024 --tile 256 --huge-pages false");
    assert_eq!(off["huge_pages"], false);
    let help = common::run("cholesky --help").1;
    let line = help.lines().find(|l| l.contains("--huge-pages")).unwrap();
    assert!(line.contains("[<BOOL>]"), "{line}");
}

#[test]
fn qr_s_default_tile_is_the_one_its_help_gives() {
    let help = common::run("qr --help").1;
    // The option's paragraph: on its line, or below it when the help lists values.
    let from = help.find("--tile").unwrap();
    let line = help[from..].split("\n\n").next().unwrap();
    assert!(
        line.contains("else 384") && line.contains("512 for"),
        "{line}"
    );
    for (shape, tile) in [
        ("--m 200 --n 150", 200),
        ("--m 3000 --n 300", 512),
        ("--m 1200 --n 1000", 384),
    ] {
        let r = common::json(&format!("qr {shape} --clusters 1x1"));
        assert_eq!(r["tile"], tile, "{shape}");
    }
}
