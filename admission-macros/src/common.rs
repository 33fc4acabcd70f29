//! Pieces both attributes share: the error collector, the `crate = "path"`
//! key, the `key = value` separators and the error for what is not a key.
//!
//! This module owns no attribute of its own; it must never decide what a key
//! means, only how keys are spelled.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::{Ident, Item, LitStr, Path, Token};

/// Collects independent errors so one build reports every mistake.
#[derive(Default)]
pub(crate) struct Errors {
    first: Option<syn::Error>,
}

impl Errors {
    /// Records `err` next to the errors already found.
    pub(crate) fn push(&mut self, err: syn::Error) {
        match &mut self.first {
            Some(first) => first.combine(err),
            None => self.first = Some(err),
        }
    }

    /// Records the error of `result`, if any, and gives back its value.
    pub(crate) fn take<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|err| self.push(err)).ok()
    }

    /// Records one `key = value`: a key given twice is an error spanned on
    /// the second; the first valid value is kept.
    pub(crate) fn record<T>(
        &mut self,
        seen: &mut bool,
        slot: &mut Option<T>,
        span: Span,
        key: &str,
        value: syn::Result<T>,
    ) {
        if std::mem::replace(seen, true) {
            self.push(repeated(span, key));
        }
        if let Some(value) = self.take(value) {
            slot.get_or_insert(value);
        }
    }

    /// `Err` with every recorded error, or `Ok(())` when there is none.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.first.map_or(Ok(()), Err)
    }
}

/// The path generated code uses for `admission-core`: `::admission_core`
/// unless `crate = "path"` said otherwise.
pub(crate) fn crate_path(given: Option<Path>) -> TokenStream {
    match given {
        Some(path) => quote!(#path),
        None => quote!(::admission_core),
    }
}

/// Parses `crate = "path"`, its `crate` next in `input`, into `krate`
/// (once: `seen` says whether it was given before).
pub(crate) fn parse_crate_key(
    input: ParseStream<'_>,
    errors: &mut Errors,
    seen: &mut bool,
    krate: &mut Option<Path>,
) -> syn::Result<()> {
    let key: Token![crate] = input.parse()?;
    parse_eq(input, "crate", "\"my_admission\"")?;
    let value = parse_crate_value(input);
    errors.record(seen, krate, key.span, "crate", value);
    Ok(())
}

/// Parses the value of `crate = "path"`.
fn parse_crate_value(input: ParseStream<'_>) -> syn::Result<Path> {
    if !input.peek(LitStr) {
        return Err(
            input.error("`crate` takes the path as a string: write `crate = \"my_admission\"`")
        );
    }
    let lit: LitStr = input.parse()?;
    lit.parse::<Path>().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!(
                "`crate` must name a path, e.g. `crate = \"my_admission\"`; `{}` is not one",
                lit.value()
            ),
        )
    })
}

/// Parses the `=` after `key`, with a pointed message for `key: value`.
pub(crate) fn parse_eq(input: ParseStream<'_>, key: &str, example: &str) -> syn::Result<()> {
    if input.peek(Token![:]) && !input.peek(Token![::]) {
        let colon: Token![:] = input.parse()?;
        return Err(syn::Error::new(
            colon.span,
            format!("expected `=` after `{key}`: write `{key} = {example}`"),
        ));
    }
    if !input.peek(Token![=]) {
        return Err(input.error(format!(
            "expected `=` after `{key}`: write `{key} = {example}`"
        )));
    }
    input.parse::<Token![=]>()?;
    if input.is_empty() || input.peek(Token![,]) {
        return Err(input.error(format!(
            "missing value for `{key}`: write `{key} = {example}`"
        )));
    }
    Ok(())
}

/// Parses the `,` between keys (or the end of the list).
pub(crate) fn parse_separator(input: ParseStream<'_>) -> syn::Result<()> {
    if input.is_empty() {
        return Ok(());
    }
    if !input.peek(Token![,]) {
        return Err(input.error("expected `,` between keys"));
    }
    input.parse::<Token![,]>()?;
    Ok(())
}

/// The error for what stands where a key should: an unknown identifier is
/// told the attribute's `valid` keys, anything else is shown the attribute
/// written right (`expected`, then `example`).
pub(crate) fn not_a_key(
    input: ParseStream<'_>,
    valid: &str,
    expected: &str,
    example: &str,
) -> syn::Error {
    if !input.peek(Ident::peek_any) {
        return syn::Error::new(
            input.span(),
            format!("expected `{expected}`: write `{example}`"),
        );
    }
    match input.call(Ident::parse_any) {
        Ok(key) => syn::Error::new(
            key.span(),
            format!("unknown key `{key}`: valid keys are {valid}"),
        ),
        Err(err) => err,
    }
}

/// The error for a key given twice, spanned on the second.
fn repeated(span: Span, key: &str) -> syn::Error {
    syn::Error::new(span, format!("`{key}` specified more than once"))
}

/// `a::b::C` as written, without the spaces `to_string` puts in.
pub(crate) fn path_to_string(path: &Path) -> String {
    let segments: Vec<String> = path
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    let joined = segments.join("::");
    if path.leading_colon.is_some() {
        format!("::{joined}")
    } else {
        joined
    }
}

/// What `item` is, for "belongs on ..." messages, and the tokens to span the
/// message on: the item's name where it has one.
pub(crate) fn describe(item: &Item) -> (&'static str, TokenStream) {
    match item {
        Item::Struct(s) => ("a struct", s.ident.to_token_stream()),
        Item::Enum(e) => ("an enum", e.ident.to_token_stream()),
        Item::Union(u) => ("a union", u.ident.to_token_stream()),
        Item::Fn(f) => ("a function", f.sig.ident.to_token_stream()),
        Item::Trait(t) => ("a trait", t.ident.to_token_stream()),
        Item::Impl(i) => ("an `impl` block", i.impl_token.to_token_stream()),
        Item::Mod(m) => ("a module", m.ident.to_token_stream()),
        Item::Type(t) => ("a type alias", t.ident.to_token_stream()),
        Item::Const(c) => ("a `const`", c.ident.to_token_stream()),
        Item::Static(s) => ("a `static`", s.ident.to_token_stream()),
        other => ("this item", other.to_token_stream()),
    }
}
