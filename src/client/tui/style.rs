//! Styled text for the terminal: spans of text with a style, written as ANSI SGR sequences.
//! Colour only where the terminal has it and the person wants it (`NO_COLOR` unset,
//! https://no-color.org); bold, italic, underline and strike-through stay, as `NO_COLOR` asks;
//! a `dumb` terminal gets no sequences at all.

/// A run of text in one style. The text is already safe for a terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub style: Style,
}

impl Span {
    pub fn new(text: &str, style: Style) -> Span {
        Span { text: text.to_string(), style }
    }
}

/// One line on the screen.
pub type Line = Vec<Span>;

/// The ANSI colours used (foreground, 30–37).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    Red = 31,
    Green = 32,
    Yellow = 33,
    Blue = 34,
    Cyan = 36,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Style {
    pub bold: bool,
    pub dim: bool,
    pub italic: bool,
    pub underline: bool,
    pub strike: bool,
    pub reverse: bool,
    pub colour: Option<Colour>,
}

const fn style(colour: Option<Colour>) -> Style {
    Style { bold: false, dim: false, italic: false, underline: false, strike: false, reverse: false, colour }
}

impl Style {
    pub const PLAIN: Style = style(None);
    pub const BOLD: Style = Style { bold: true, ..style(None) };
    pub const ITALIC: Style = Style { italic: true, ..style(None) };
    pub const UNDERLINE: Style = Style { underline: true, ..style(None) };
    pub const STRIKE: Style = Style { strike: true, ..style(None) };
    pub const DIM: Style = Style { dim: true, ..style(None) };
    pub const CODE: Style = style(Some(Colour::Yellow));
    pub const LINK: Style = Style { underline: true, ..style(Some(Colour::Blue)) };
    pub const HEADER: Style = Style { reverse: true, bold: true, ..style(None) };
    pub const OWN: Style = Style { bold: true, ..style(Some(Colour::Green)) };
    pub const PEER: Style = Style { bold: true, ..style(Some(Colour::Cyan)) };
    pub const NOTE: Style = style(Some(Colour::Yellow));
    pub const OK: Style = style(Some(Colour::Green));
    pub const ALERT: Style = Style { bold: true, ..style(Some(Colour::Red)) };
    pub const BUTTON: Style = Style { reverse: true, ..style(None) };

    /// This style with `other`'s attributes added (its colour wins when it has one).
    pub fn with(self, other: Style) -> Style {
        Style {
            bold: self.bold || other.bold,
            dim: self.dim || other.dim,
            italic: self.italic || other.italic,
            underline: self.underline || other.underline,
            strike: self.strike || other.strike,
            reverse: self.reverse || other.reverse,
            colour: other.colour.or(self.colour),
        }
    }
}

/// What the terminal gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Palette {
    /// Attributes and colours.
    Colour,
    /// Attributes only (`NO_COLOR`).
    NoColour,
    /// Plain text (`TERM=dumb`).
    None,
}

impl Palette {
    /// From the environment: `TERM` and `NO_COLOR` (set and not empty).
    pub fn from_env() -> Palette {
        let term = std::env::var("TERM").unwrap_or_default();
        if term == "dumb" {
            Palette::None
        } else if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            Palette::NoColour
        } else {
            Palette::Colour
        }
    }
}

/// A line as bytes for the terminal: each span in its style, then the style reset.
pub fn ansi(line: &Line, palette: Palette) -> String {
    let mut out = String::new();
    for span in line {
        let codes = codes(span.style, palette);
        if codes.is_empty() {
            out.push_str(&span.text);
        } else {
            out.push_str(&format!("\x1b[{}m{}\x1b[0m", codes.join(";"), span.text));
        }
    }
    out
}

fn codes(s: Style, palette: Palette) -> Vec<String> {
    if palette == Palette::None {
        return Vec::new();
    }
    let mut codes = Vec::new();
    for (on, code) in [(s.bold, 1), (s.dim, 2), (s.italic, 3), (s.underline, 4), (s.reverse, 7), (s.strike, 9)] {
        if on {
            codes.push(code.to_string());
        }
    }
    if let (Some(c), Palette::Colour) = (s.colour, palette) {
        codes.push((c as u8).to_string());
    }
    codes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palettes_decide_what_reaches_the_terminal() {
        let line = vec![Span::new("hi ", Style::PLAIN), Span::new("bob", Style::PEER)];
        assert_eq!(ansi(&line, Palette::Colour), "hi \x1b[1;36mbob\x1b[0m");
        assert_eq!(ansi(&line, Palette::NoColour), "hi \x1b[1mbob\x1b[0m");
        assert_eq!(ansi(&line, Palette::None), "hi bob");
        assert_eq!(Style::BOLD.with(Style::LINK), Style { bold: true, underline: true, colour: Some(Colour::Blue), ..Style::PLAIN });
    }
}
