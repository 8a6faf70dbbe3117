//! The proof of work as a page shows it: the seed for the solver (templates/proof.js, a Web
//! Worker hashing with WebCrypto), a progress bar, and what a browser that cannot run it is
//! told. The built-in challenge page and `{{{proofOfWork}}}` in a custom template insert the same
//! HTML.

use crate::language::Locale;
use crate::respond::status::ProofOfWorkBody;

const SOLVER: &str = include_str!("../../templates/proof.js");

pub fn widget(proof: &ProofOfWorkBody, locale: Locale) -> String {
    let t = locale.texts();
    let needs_script = escaped(t.proof_needs_script);
    format!(
        "<div id=\"wr-proof\" data-seed=\"{seed}\" data-bits=\"{bits}\" data-url=\"{url}\">\
         <progress id=\"wr-proof-progress\" max=\"1\" value=\"0\" aria-label=\"{label}\"></progress>\
         </div>\n<noscript><p class=\"hint\">{needs_script}</p></noscript>\n\
         <p class=\"hint\" id=\"wr-proof-unsupported\" hidden>{needs_script}</p>\n\
         <script>{SOLVER}</script>",
        seed = escaped(&proof.seed),
        bits = proof.difficulty_bits,
        url = escaped(&proof.url),
        label = escaped(t.challenge_heading),
    )
}

/// Text for HTML (an attribute or an element's content).
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(seed: &str) -> ProofOfWorkBody {
        ProofOfWorkBody {
            kind: "proof_of_work",
            algorithm: "sha256",
            seed: seed.into(),
            difficulty_bits: 18,
            expires: "2026-12-03T00:05:00.000Z".into(),
            url: "/__waitroom/proof".into(),
            refused: None,
            widget: String::new(),
        }
    }

    #[test]
    fn the_widget_carries_the_seed_and_the_solver_and_escapes() {
        let html = widget(&body("v2.abc_-"), Locale::DeDe);
        assert!(
            html.contains("data-seed=\"v2.abc_-\" data-bits=\"18\""),
            "{html}"
        );
        assert!(html.contains("data-url=\"/__waitroom/proof\""));
        assert!(html.contains("crypto.subtle.digest(\"SHA-256\""));
        assert!(html.contains(Locale::DeDe.texts().proof_needs_script));
        let hostile = widget(&body("\"><script>x</script>"), Locale::EnUs);
        assert!(!hostile.contains("\"><script>x"), "{hostile}");
    }
}
