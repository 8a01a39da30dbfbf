//! Decimal numbers in Slurm's and TensorFlow's texts: read strictly (digits only: no sign,
//! no space, no `0x`), written without `fmt` (this runs once per host name and per endpoint).

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
