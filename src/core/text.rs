//! The texts tfcluster reads and writes at the bottom of the core (every other module may use
//! them; they use none): decimal numbers in Slurm's and TensorFlow's texts, read strictly (digits
//! only: no sign, no space, no `0x`) and written without `fmt` (this runs once per host name and
//! per endpoint), and JSON strings.

/// Whether `text` is one or more ASCII digits.
pub fn is_decimal(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `text` as a number if it is only digits and fits `T`.
pub fn decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if is_decimal(text) {
        text.parse().ok()
    } else {
        None
    }
}

/// `n` in decimal followed by a NUL: a task's value for a variable that holds a number (a
/// rank, a count), ready for Slurm.
pub fn decimal_nul(n: u32) -> String {
    let mut out = String::with_capacity(11);
    push_decimal(&mut out, n.into(), 0);
    out.push('\0');
    out
}

/// Appends `n`, zero-padded to at least `width` digits (Slurm's `%0*lu`).
pub fn push_decimal(out: &mut String, mut n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for _ in (digits.len() - i)..width {
        out.push('0');
    }
    out.push_str(std::str::from_utf8(&digits[i..]).expect("ASCII digits"));
}

fn is_plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// Appends `s` as a JSON string.
pub fn push_json_str(out: &mut String, s: &str) {
    // Plain names (the common case) need no escaping; serde_json handles the rest.
    if is_plain(s) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}

/// The length of `s` written as a JSON string.
pub fn json_str_len(s: &str) -> usize {
    if is_plain(s) {
        s.len() + 2
    } else {
        serde_json::Value::from(s).to_string().len()
    }
}
