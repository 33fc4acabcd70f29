//! `#[reserved(slots = N)]`: one reservation per loop-owner type.
//!
//! This module owns the attribute's keys and the `LoopOwner` impl it
//! generates. It must never create a reservation at expansion time nor pick a
//! size of its own: the size is the user's, checked at compile time, and the
//! reservation is created lazily by `Reservation::__for_owner`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, ExprUnary, GenericParam, Generics, Ident, Item, Lit, LitInt, LitStr,
    Path, Token, UnOp,
};

use crate::common::{self, Errors};

mod kw {
    syn::custom_keyword!(slots);
    syn::custom_keyword!(name);
}

/// What to write instead, repeated in several messages.
const EXAMPLE: &str = "#[reserved(slots = 2)]";

/// The parsed arguments.
struct Args {
    slots: Option<Slots>,
    name: Option<LitStr>,
    krate: Option<Path>,
}

/// The value of `slots`.
enum Slots {
    /// An integer literal, already checked to be at least 1.
    Literal(LitInt),
    /// The path of a `const`, checked by the generated const item.
    Const(Path),
}

/// Expands `#[reserved(args)] item`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let args = errors.take(parse_args.parse2(args));
    let item = syn::parse2::<Item>(item)?;

    let target = errors.take(target(&item));
    if let Some(target) = &target {
        if let Some(again) = target.attrs.iter().find(|attr| is_reserved(attr)) {
            errors.push(syn::Error::new_spanned(
                again,
                "`#[reserved]` applied more than once: a type has exactly one reservation; \
                 remove this attribute and size the other one to the owner's calls plus one spare",
            ));
        }
        errors.take(check_generics(target.generics));
    }
    errors.finish()?;

    let (Some(args), Some(target)) = (args, target) else {
        unreachable!("errors.finish() returned Ok, so both parsed");
    };
    let Some(slots) = args.slots else {
        unreachable!("parse_args rejects a missing `slots`");
    };
    Ok(generate(&item, &target, &slots, args.name, args.krate))
}

/// Parses `slots = N, name = "...", crate = "..."` in any order.
fn parse_args(input: ParseStream<'_>) -> syn::Result<Args> {
    let mut errors = Errors::default();
    let mut args = Args {
        slots: None,
        name: None,
        krate: None,
    };
    let mut seen_slots = false;
    let mut seen_name = false;
    let mut seen_crate = false;

    while !input.is_empty() {
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::slots) {
            let key: kw::slots = input.parse()?;
            common::parse_eq(input, "slots", "2")?;
            let value = parse_slots(input);
            errors.record(&mut seen_slots, &mut args.slots, key.span, "slots", value);
        } else if lookahead.peek(kw::name) {
            let key: kw::name = input.parse()?;
            common::parse_eq(input, "name", "\"recovery\"")?;
            let value = parse_name(input);
            errors.record(&mut seen_name, &mut args.name, key.span, "name", value);
        } else if lookahead.peek(Token![crate]) {
            common::parse_crate_key(input, &mut errors, &mut seen_crate, &mut args.krate)?;
        } else {
            return Err(common::not_a_key(
                input,
                "`slots`, `name` and `crate`",
                "slots = N",
                EXAMPLE,
            ));
        }
        common::parse_separator(input)?;
    }

    if !seen_slots {
        errors.push(syn::Error::new(
            Span::call_site(),
            format!(
                "missing `slots`: write `{EXAMPLE}`, the owner's concurrent calls plus one spare"
            ),
        ));
    }
    errors.finish()?;
    Ok(args)
}

/// Parses the value of `slots`: an integer literal of at least 1 or the path
/// of a `const`.
fn parse_slots(input: ParseStream<'_>) -> syn::Result<Slots> {
    let expr: Expr = input.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => {
            if !matches!(lit.suffix(), "" | "usize") {
                return Err(syn::Error::new(
                    lit.span(),
                    format!(
                        "`slots` is a `usize`: drop the `{}` suffix, e.g. `slots = 2`",
                        lit.suffix()
                    ),
                ));
            }
            let value: usize = lit.base10_parse()?;
            if value == 0 {
                return Err(syn::Error::new(
                    lit.span(),
                    "`slots` must be at least 1: write the owner's concurrent calls plus one \
                     spare, e.g. `slots = 2` for a loop that makes one call at a time",
                ));
            }
            Ok(Slots::Literal(LitInt::new(&value.to_string(), lit.span())))
        }
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
            Ok(Slots::Const(path.path))
        }
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_), ..
        }) => Err(syn::Error::new_spanned(
            &expr,
            "`slots` cannot be negative: write a count of at least 1, e.g. `slots = 2`",
        )),
        Expr::Lit(ExprLit {
            lit: Lit::Float(lit),
            ..
        }) => Err(syn::Error::new(
            lit.span(),
            "`slots` is a whole number of slots: write an integer, e.g. `slots = 2`",
        )),
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Err(syn::Error::new(
            lit.span(),
            format!(
                "`slots` takes an integer, not a string: write `slots = {}` without quotes",
                lit.value()
            ),
        )),
        other => Err(syn::Error::new_spanned(
            &other,
            "`slots` takes an integer literal or the path of a `const`: write `slots = 2` or \
             `slots = RECOVERY_SLOTS`",
        )),
    }
}

/// Parses the value of `name`: a non-empty string.
fn parse_name(input: ParseStream<'_>) -> syn::Result<LitStr> {
    if !input.peek(LitStr) {
        let expr: Expr = input.parse()?;
        return Err(syn::Error::new_spanned(
            &expr,
            "`name` takes a string: write `name = \"recovery\"`",
        ));
    }
    let lit: LitStr = input.parse()?;
    if lit.value().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "`name` cannot be empty: write `name = \"recovery\"`, or leave `name` out to use \
             the type's name",
        ));
    }
    Ok(lit)
}

/// The type `#[reserved]` is applied to.
struct Target<'a> {
    ident: &'a Ident,
    generics: &'a Generics,
    attrs: &'a [Attribute],
}

/// Accepts a struct or an enum; anything else is an error naming what it is.
fn target(item: &Item) -> syn::Result<Target<'_>> {
    match item {
        Item::Struct(s) => Ok(Target {
            ident: &s.ident,
            generics: &s.generics,
            attrs: &s.attrs,
        }),
        Item::Enum(e) => Ok(Target {
            ident: &e.ident,
            generics: &e.generics,
            attrs: &e.attrs,
        }),
        other => {
            let (what, tokens) = common::describe(other);
            Err(syn::Error::new_spanned(
                tokens,
                format!(
                    "`#[reserved]` belongs on a struct or an enum (the loop owner's type), \
                     not on {what}"
                ),
            ))
        }
    }
}

/// Rejects type and const parameters: the generated `static` would be one
/// value shared by every instantiation.
fn check_generics(generics: &Generics) -> syn::Result<()> {
    let mut errors = Errors::default();
    for param in &generics.params {
        let name = match param {
            GenericParam::Type(ty) => &ty.ident,
            GenericParam::Const(c) => &c.ident,
            GenericParam::Lifetime(_) => continue,
        };
        errors.push(syn::Error::new_spanned(
            param,
            format!(
                "`#[reserved]` cannot go on a generic type: its reservation lives in a `static`, \
                 and a `static` in a generic impl is one value shared by every instantiation, so \
                 each choice of `{name}` would share one reservation; implement `LoopOwner` by \
                 hand with a `Reservation` field instead"
            ),
        ));
    }
    errors.finish()
}

/// Whether `attr` is another `#[reserved]` (however it is imported).
fn is_reserved(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|segment| segment.ident == "reserved")
}

/// The item followed by its `LoopOwner` impl.
fn generate(
    item: &Item,
    target: &Target<'_>,
    slots: &Slots,
    name: Option<LitStr>,
    krate: Option<Path>,
) -> TokenStream {
    let krate = common::crate_path(krate);
    let ident = target.ident;
    let name = name.unwrap_or_else(|| LitStr::new(&ident.unraw().to_string(), ident.span()));
    let (impl_generics, ty_generics, where_clause) = target.generics.split_for_impl();

    let (value, span, shown) = match slots {
        Slots::Literal(lit) => (quote!(#lit), lit.span(), lit.to_string()),
        Slots::Const(path) => (quote!(#path), path.span(), common::path_to_string(path)),
    };
    // Literal braces would be read as format arguments by `panic!`.
    let shown = shown.replace('{', "{{").replace('}', "}}");
    let too_few = LitStr::new(
        &format!(
            "`slots` must be at least 1: `{shown}` is 0; size the reservation to the owner's \
             concurrent calls plus one spare, e.g. 2"
        ),
        span,
    );
    let too_many = LitStr::new(
        &format!(
            "`slots` must be at most `admission_core::pool::MAX_CAPACITY`: `{shown}` is larger"
        ),
        span,
    );
    // A `const` item is evaluated by `cargo check` too, so a `const` path
    // whose value is 0 fails the build with our message, spanned on the path.
    // The item names are unusual because the user's path is resolved inside
    // this body, where an item named like it (`SLOTS`) would shadow it.
    let slots_const = quote_spanned! {span=>
        const __ADMISSION_SLOTS: ::core::num::NonZeroUsize = match ::core::num::NonZeroUsize::new(#value) {
            ::core::option::Option::Some(slots) if slots.get() <= #krate::pool::MAX_CAPACITY => slots,
            ::core::option::Option::Some(_) => ::core::panic!(#too_many),
            ::core::option::Option::None => ::core::panic!(#too_few),
        };
    };

    quote! {
        #item

        impl #impl_generics #krate::LoopOwner for #ident #ty_generics #where_clause {
            fn reservation(&self) -> &#krate::Reservation {
                #slots_const
                static __ADMISSION_RESERVATION: ::std::sync::OnceLock<#krate::Reservation> =
                    ::std::sync::OnceLock::new();
                __ADMISSION_RESERVATION
                    .get_or_init(|| #krate::Reservation::__for_owner(#name, __ADMISSION_SLOTS))
            }
        }
    }
}
