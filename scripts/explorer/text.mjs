// Text from a site shown to a person: control characters (but newline and tab),
// bidirectional overrides, zero-width and other invisible formatting are shown escaped
// as `\u{..}`, as the CLI shows them (src/display.rs), so a miner's answer or a hotkey
// cannot reorder, hide or forge what the page says.

const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/gu;

/** `text` with every character a page must not apply or hide shown as `\u{..}`. */
export function shown(text) {
  return String(text).replace(HIDDEN, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
}
