//! Shamir secret sharing over GF(2^8), as SOPS splits a data key across key groups.
//!
//! With more than one key group, every key of group *i* wraps share *i* of the data key
//! instead of the key itself. A share holds one y byte per secret byte followed by its x
//! coordinate; the secret is the polynomials' value at x = 0, found by Lagrange
//! interpolation in the AES field (x^8 + x^4 + x^3 + x + 1). SOPS up to 3.9 chose x at
//! random, later versions 1, 2, 3…; the x byte is read from each share, so both combine.

/// Why shares could not be combined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShamirError {
    #[error("less than two parts cannot be used to reconstruct the secret")]
    TooFewParts,
    #[error("parts must be at least two bytes")]
    PartTooShort,
    #[error("all parts must be the same length")]
    LengthMismatch,
    #[error("duplicate part detected")]
    DuplicatePart,
}

/// Multiplication in GF(2^8) modulo the AES polynomial, without table lookups.
fn mul(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0x1b;
        }
        b >>= 1;
    }
    product
}

/// The multiplicative inverse: a^254, since a^255 = 1 for every non-zero a.
fn inverse(a: u8) -> u8 {
    let mut result = 1u8;
    let mut base = a;
    let mut exponent = 254u8;
    while exponent != 0 {
        if exponent & 1 != 0 {
            result = mul(result, base);
        }
        base = mul(base, base);
        exponent >>= 1;
    }
    result
}

/// The secret the shares were split from: every share must come from the same split, and at
/// least as many as its threshold (fewer give a wrong secret, which the file's MAC and
/// authenticated values then refuse).
pub fn combine(parts: &[Vec<u8>]) -> Result<Vec<u8>, ShamirError> {
    if parts.len() < 2 {
        return Err(ShamirError::TooFewParts);
    }
    let length = parts[0].len();
    if length < 2 {
        return Err(ShamirError::PartTooShort);
    }
    if parts.iter().any(|part| part.len() != length) {
        return Err(ShamirError::LengthMismatch);
    }
    let xs: Vec<u8> = parts.iter().map(|part| part[length - 1]).collect();
    for (index, x) in xs.iter().enumerate() {
        if xs[..index].contains(x) {
            return Err(ShamirError::DuplicatePart);
        }
    }
    // Lagrange basis at 0: Π_{j≠i} x_j / (x_i - x_j); subtraction is XOR.
    let basis: Vec<u8> = (0..xs.len())
        .map(|i| {
            xs.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .fold(1u8, |acc, (_, &xj)| mul(acc, mul(xj, inverse(xs[i] ^ xj))))
        })
        .collect();
    Ok((0..length - 1)
        .map(|byte| {
            parts
                .iter()
                .zip(&basis)
                .fold(0u8, |acc, (part, &weight)| acc ^ mul(part[byte], weight))
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The share byte at `x` of the polynomial with `intercept` and then `coefficients`
    /// (a_1, a_2, …), by Horner's rule.
    fn evaluate(intercept: u8, coefficients: &[u8], x: u8) -> u8 {
        let high = coefficients
            .iter()
            .rev()
            .fold(0u8, |acc, &c| mul(acc, x) ^ c);
        mul(high, x) ^ intercept
    }

    /// Shares of `secret` at the x coordinates given, with the same polynomial coefficients
    /// for every byte instead of random ones. Test-only: decryption never splits.
    pub(crate) fn split_at(secret: &[u8], coefficients: &[u8], xs: &[u8]) -> Vec<Vec<u8>> {
        xs.iter()
            .map(|&x| {
                let mut share: Vec<u8> = secret
                    .iter()
                    .map(|&byte| evaluate(byte, coefficients, x))
                    .collect();
                share.push(x);
                share
            })
            .collect()
    }

    /// Shares at x = 1, 2, …, as SOPS 3.10+ lays them out.
    pub(crate) fn split(secret: &[u8], coefficients: &[u8], parts: u8) -> Vec<Vec<u8>> {
        split_at(secret, coefficients, &(1..=parts).collect::<Vec<_>>())
    }

    #[test]
    fn multiplies_as_the_aes_field() {
        // FIPS-197's worked example.
        assert_eq!(mul(0x57, 0x83), 0xc1);
        assert_eq!(mul(0x57, 0x13), 0xfe);
        for a in 1..=255u8 {
            assert_eq!(mul(a, inverse(a)), 1, "{a:#x}");
        }
    }

    #[test]
    fn combines_a_known_split() {
        // secret 42 00 ff, threshold 3, coefficients 1 and 2 for every byte, x = 1..4.
        let shares = [
            vec![0x41, 0x03, 0xfc, 0x01],
            vec![0x48, 0x0a, 0xf5, 0x02],
            vec![0x4b, 0x09, 0xf6, 0x03],
            vec![0x66, 0x24, 0xdb, 0x04],
        ];
        assert_eq!(split(&[0x42, 0x00, 0xff], &[1, 2], 4), shares);
        for chosen in [[0, 1, 2], [1, 2, 3], [0, 2, 3], [3, 0, 1]] {
            let parts: Vec<Vec<u8>> = chosen.iter().map(|&i| shares[i].clone()).collect();
            assert_eq!(combine(&parts).unwrap(), [0x42, 0x00, 0xff]);
        }
        assert_eq!(combine(&shares).unwrap(), [0x42, 0x00, 0xff]);
        // Below the threshold the result is some other secret, never an error.
        assert_ne!(combine(&shares[..2]).unwrap(), [0x42, 0x00, 0xff]);
    }

    #[test]
    fn random_x_coordinates_combine_too() {
        // SOPS ≤ 3.9 chose distinct random x coordinates.
        let secret: Vec<u8> = (0..32).collect();
        let shares = split_at(&secret, &[0x9d, 0x11], &[200, 17, 93]);
        assert_eq!(combine(&shares).unwrap(), secret);
    }

    #[test]
    fn malformed_parts_are_refused() {
        assert_eq!(combine(&[vec![1, 2]]), Err(ShamirError::TooFewParts));
        assert_eq!(combine(&[vec![1], vec![2]]), Err(ShamirError::PartTooShort));
        assert_eq!(
            combine(&[vec![1, 2, 3], vec![1, 2]]),
            Err(ShamirError::LengthMismatch)
        );
        assert_eq!(
            combine(&[vec![1, 5], vec![2, 5]]),
            Err(ShamirError::DuplicatePart)
        );
    }
}
