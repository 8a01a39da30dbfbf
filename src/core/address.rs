//! The address TensorFlow dials for a node.
//!
//! Slurm's node lists hold NodeNames, which are not always the name of the network TensorFlow
//! should use (InfiniBand interfaces are often `node12-ib`, or a separate domain). The admin sets
//! a template once; `%h` is the NodeName and `%%` a literal `%`.

/// A parsed `address=` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressFormat {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Host,
}

impl Default for AddressFormat {
    fn default() -> Self {
        AddressFormat {
            parts: vec![Part::Host],
        }
    }
}

impl AddressFormat {
    /// `None` when the template has no `%h`, an unknown `%x`, or characters that cannot be in
    /// a host name or address (whitespace, `,`, `"`, `:`).
    pub fn parse(template: &str) -> Option<AddressFormat> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = template.chars();
        while let Some(c) = chars.next() {
            match c {
                '%' => match chars.next()? {
                    'h' => {
                        if !text.is_empty() {
                            parts.push(Part::Text(std::mem::take(&mut text)));
                        }
                        parts.push(Part::Host);
                    }
                    '%' => text.push('%'),
                    _ => return None,
                },
                c if c.is_whitespace() || matches!(c, ',' | '"' | ':' | '\\') => return None,
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        parts
            .contains(&Part::Host)
            .then_some(AddressFormat { parts })
    }

    pub fn render(&self, host: &str) -> String {
        let mut out = String::with_capacity(host.len() + 16);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Host => out.push_str(host),
            }
        }
        out
    }
}
