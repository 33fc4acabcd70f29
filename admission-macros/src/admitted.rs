//! `#[admitted(class = ...)]`: a request lease for one handler, in axum
//! (`admitted_axum`) or actix-web (`admitted_actix`).
//!
//! This module owns the attribute's keys and the handler rewrite, shared by
//! both adapters. It must never change what the handler takes (attributes,
//! visibility, generics and arguments stay as written), must only name the
//! adapter's `__private` module (`Class`, `RequestPools`, `Rejection`) and
//! `::core` items, and must only accept pools that live for the whole
//! program.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{
    Expr, ExprLit, ExprPath, FnArg, Ident, Item, ItemFn, Lit, LitStr, Path, ReturnType, Token,
    Type, TypeParamBound,
};

use crate::common::{self, Errors};

mod kw {
    syn::custom_keyword!(class);
    syn::custom_keyword!(pools);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(wait_ms);
    syn::custom_keyword!(queue);
    syn::custom_keyword!(criticality);
    syn::custom_keyword!(flow);
    syn::custom_keyword!(cost);
}

/// What to write instead, repeated in several messages.
const EXAMPLE: &str = "#[admitted(class = work)]` or `#[admitted(class = control)]";

/// The adapter an entry point belongs to: it names the crate generated code
/// goes through and the framework's words in messages.
#[derive(Clone, Copy)]
pub(crate) enum Adapter {
    Axum,
    Actix,
}

impl Adapter {
    /// The adapter crate's path when `crate = "..."` is not given.
    fn default_crate(self) -> TokenStream {
        match self {
            Adapter::Axum => quote!(::admission_axum),
            Adapter::Actix => quote!(::admission_actix),
        }
    }

    /// The framework's own response trait, as a return type.
    fn response_trait(self) -> &'static str {
        match self {
            Adapter::Axum => "impl IntoResponse",
            Adapter::Actix => "impl Responder",
        }
    }

    /// The framework's name, and the import of the other adapter's
    /// attribute, for the wrong-adapter message.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Adapter::Axum => ("axum", "actix-web", "admission_actix::admitted"),
            Adapter::Actix => ("actix-web", "axum", "admission_axum::admitted"),
        }
    }

    /// Whether `ident` (with the identifier before it, for `web::`) is
    /// unmistakably the *other* framework's: an actix-web type for the axum
    /// attribute, axum or its `IntoResponse` for the actix-web one. Names
    /// both frameworks use (`Json`, `Path`, `Query`, `State`) or an app may
    /// use for its own types are never a sign: a false sign would refuse a
    /// handler that builds.
    fn is_foreign(self, previous: Option<&str>, ident: &str) -> bool {
        match self {
            Adapter::Axum => {
                matches!(
                    ident,
                    "actix_web" | "HttpRequest" | "HttpResponse" | "Responder" | "ServiceRequest"
                ) || (previous == Some("web")
                    && matches!(ident, "Data" | "ThinData" | "ReqData" | "Payload"))
            }
            Adapter::Actix => matches!(ident, "axum" | "IntoResponse"),
        }
    }

    /// How the framework hands a handler its state.
    fn state_extractor(self) -> &'static str {
        match self {
            Adapter::Axum => "State(app): State<App>",
            Adapter::Actix => "app: web::Data<App>",
        }
    }
}

/// A request class, as the attribute spells it.
#[derive(Clone, Copy)]
enum Class {
    Work,
    Control,
}

/// The parsed arguments.
struct Args {
    class: Option<(Class, Span)>,
    /// The path of pools that live for the whole program (a `static`).
    pools: Option<ExprPath>,
    krate: Option<Path>,
    /// How the lease is taken: fail fast (the default), a bounded wait, or
    /// the pool's queue.
    wait: Wait,
    /// The criticality the handler's admissions are made at, if fixed.
    criticality: Option<(Criticality, Span)>,
    /// Who the request is for: an expression over the handler's
    /// arguments, evaluated per request and hashed into the caller's flow.
    flow: Option<Expr>,
    /// How many slots of its class the route's request holds (1 to 255).
    cost: Option<(u8, Span)>,
}

/// How `#[admitted]` takes the lease.
#[derive(Clone, Copy)]
enum Wait {
    FailFast,
    Millis(u64),
    Queue,
}

/// A criticality, as the attribute spells it.
#[derive(Clone, Copy)]
enum Criticality {
    Critical,
    Default,
    Sheddable,
}

/// Expands `#[admitted(args)] item` for `adapter`.
pub(crate) fn expand(
    args: TokenStream,
    item: TokenStream,
    adapter: Adapter,
) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let args = errors.take(parse_args.parse2(args));
    let item = syn::parse2::<Item>(item)?;
    let handler = errors.take(handler(item, adapter));
    errors.finish()?;

    let (Some(args), Some(handler)) = (args, handler) else {
        unreachable!("errors.finish() returned Ok, so both parsed");
    };
    Ok(generate(handler, args, adapter))
}

/// Parses `class = work|control, pools = expr, crate = "..."` in any order.
fn parse_args(input: ParseStream<'_>) -> syn::Result<Args> {
    let mut errors = Errors::default();
    let mut args = Args {
        class: None,
        pools: None,
        krate: None,
        wait: Wait::FailFast,
        criticality: None,
        flow: None,
        cost: None,
    };
    let mut seen_criticality = false;
    let mut seen_flow = false;
    let mut seen_cost = false;
    let mut seen_class = false;
    let mut seen_pools = false;
    let mut seen_crate = false;
    let mut wait: Option<Span> = None;

    while !input.is_empty() {
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::class) {
            let key: kw::class = input.parse()?;
            common::parse_eq(input, "class", "work")?;
            let value = parse_class(input);
            errors.record(&mut seen_class, &mut args.class, key.span, "class", value);
        } else if lookahead.peek(kw::pools) {
            let key: kw::pools = input.parse()?;
            common::parse_eq(input, "pools", "POOLS")?;
            let value: Expr = input.parse()?;
            errors.record(
                &mut seen_pools,
                &mut args.pools,
                key.span,
                "pools",
                pools_path(&value),
            );
        } else if lookahead.peek(kw::wait_ms) {
            let key: kw::wait_ms = input.parse()?;
            common::parse_eq(input, "wait_ms", "250")?;
            let value = parse_wait_ms(input);
            if let Some(ms) = errors.take(value) {
                args.wait = Wait::Millis(ms);
            }
            errors.take(wait_key(&mut wait, key.span));
        } else if lookahead.peek(kw::queue) {
            // A bare flag: the lease waits in the pool's bounded queue.
            let key: kw::queue = input.parse()?;
            if input.peek(Token![=]) {
                return Err(syn::Error::new(
                    key.span,
                    "`queue` is a flag: write `#[admitted(class = work, queue)]`",
                ));
            }
            args.wait = Wait::Queue;
            errors.take(wait_key(&mut wait, key.span));
        } else if lookahead.peek(kw::criticality) {
            let key: kw::criticality = input.parse()?;
            common::parse_eq(input, "criticality", "critical")?;
            let value = parse_criticality(input);
            errors.record(
                &mut seen_criticality,
                &mut args.criticality,
                key.span,
                "criticality",
                value,
            );
        } else if lookahead.peek(kw::flow) {
            let key: kw::flow = input.parse()?;
            common::parse_eq(input, "flow", "tenant")?;
            let value: Expr = input.parse()?;
            errors.record(
                &mut seen_flow,
                &mut args.flow,
                key.span,
                "flow",
                flow_expr(value),
            );
        } else if lookahead.peek(kw::cost) {
            let key: kw::cost = input.parse()?;
            common::parse_eq(input, "cost", "4")?;
            let value = parse_cost(input);
            errors.record(&mut seen_cost, &mut args.cost, key.span, "cost", value);
        } else if lookahead.peek(kw::wait) {
            let key: kw::wait = input.parse()?;
            common::parse_eq(input, "wait", "\"250ms\"")?;
            let value = parse_wait(input);
            if let Some(ms) = errors.take(value) {
                args.wait = Wait::Millis(ms);
            }
            errors.take(wait_key(&mut wait, key.span));
        } else if lookahead.peek(Token![crate]) {
            common::parse_crate_key(input, &mut errors, &mut seen_crate, &mut args.krate)?;
        } else {
            return Err(common::not_a_key(
                input,
                "`class`, `pools`, `wait`, `wait_ms`, `queue`, `criticality`, `flow`, `cost` and `crate`",
                "class = ...",
                EXAMPLE,
            ));
        }
        common::parse_separator(input)?;
    }

    if !seen_class {
        errors.push(syn::Error::new(
            Span::call_site(),
            format!("missing `class`: write `{EXAMPLE}`"),
        ));
    }
    errors.finish()?;
    Ok(args)
}

/// Parses the value of `class`: `work` or `control`, unquoted.
fn parse_class(input: ParseStream<'_>) -> syn::Result<(Class, Span)> {
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!("write the class without quotes: `class = {}`", lit.value()),
        ));
    }
    if !input.peek(Ident::peek_any) {
        let expr: Expr = input.parse()?;
        return Err(syn::Error::new_spanned(
            &expr,
            "`class` is `work` or `control`: write `class = work` or `class = control`",
        ));
    }
    let ident = input.call(Ident::parse_any)?;
    match ident.to_string().as_str() {
        "work" => Ok((Class::Work, ident.span())),
        "control" => Ok((Class::Control, ident.span())),
        other => Err(syn::Error::new(
            ident.span(),
            format!("unknown class `{other}`: expected `work` or `control`"),
        )),
    }
}

/// Parses the value of `criticality`: `critical`, `default` or
/// `sheddable`, unquoted.
fn parse_criticality(input: ParseStream<'_>) -> syn::Result<(Criticality, Span)> {
    const VALUES: &str = "`criticality` is `critical`, `default` or `sheddable`";
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "write the criticality without quotes: `criticality = {}`",
                lit.value()
            ),
        ));
    }
    if !input.peek(Ident::peek_any) {
        let expr: Expr = input.parse()?;
        return Err(syn::Error::new_spanned(&expr, VALUES));
    }
    let ident = input.call(Ident::parse_any)?;
    match ident.to_string().as_str() {
        "critical" => Ok((Criticality::Critical, ident.span())),
        "default" => Ok((Criticality::Default, ident.span())),
        "sheddable" => Ok((Criticality::Sheddable, ident.span())),
        other => Err(syn::Error::new(
            ident.span(),
            format!("unknown criticality `{other}`: {VALUES}"),
        )),
    }
}

/// Accepts the value of `flow` when it can differ from one request to the
/// next (a handler's argument, a field or a call on one); a literal names
/// one flow for every request, which is no flow at all, so it is refused
/// with what to write instead.
fn flow_expr(expr: Expr) -> syn::Result<Expr> {
    match &expr {
        Expr::Lit(_) => Err(syn::Error::new_spanned(
            &expr,
            "`flow` names who each request is for (a tenant, an API key), read per request: \
             a literal is the same for every request and makes them all one flow. Write an \
             expression over the handler's arguments, e.g. `flow = tenant` or \
             `flow = claims.tenant_id`",
        )),
        Expr::Paren(inner) if matches!(&*inner.expr, Expr::Lit(_)) => {
            flow_expr((*inner.expr).clone()).map(|_| expr)
        }
        _ => Ok(expr),
    }
}

/// What to write instead of pools that do not live for the whole program.
const POOLS_INSTEAD: &str = "declare them once, `static POOLS: LazyLock<RequestPools> = \
                             LazyLock::new(|| ...);`, and write `pools = POOLS`";

/// Accepts the value of `pools` when it is a path (a `static`, checked to be
/// `'static` by the generated code); anything else is evaluated on every
/// request, so it is refused with why and what to write instead.
fn pools_path(expr: &Expr) -> syn::Result<ExprPath> {
    let message = match expr {
        Expr::Path(path) => return Ok(path.clone()),
        Expr::Paren(inner) => return pools_path(&inner.expr),
        Expr::Group(inner) => return pools_path(&inner.expr),
        Expr::Reference(reference) if matches!(&*reference.expr, Expr::Path(_)) => {
            let Expr::Path(path) = &*reference.expr else {
                unreachable!("matched a path above");
            };
            format!(
                "`pools` takes the path itself, without `&`: write `pools = {}`; the \
                 attribute borrows it for the whole program",
                common::path_to_string(&path.path)
            )
        }
        other => format!("{}; {POOLS_INSTEAD}", why_not_pools(other)),
    };
    Err(syn::Error::new_spanned(expr, message))
}

/// Why an expression other than a path cannot name the pools.
fn why_not_pools(expr: &Expr) -> &'static str {
    match expr {
        Expr::Reference(reference) => why_not_pools(&reference.expr),
        Expr::Paren(inner) => why_not_pools(&inner.expr),
        Expr::Group(inner) => why_not_pools(&inner.expr),
        Expr::Field(_) | Expr::Index(_) => {
            "`pools` takes the path of a `static`, not a handler's argument or a part of one: \
             arguments are made for each request, and pools made per request would be new \
             pools, with new slots, each time"
        }
        Expr::Call(_) | Expr::MethodCall(_) | Expr::Macro(_) => {
            "`pools` takes the path of a `static`, not a call: the call would run on every \
             request, and pools built there would be new pools, with new slots, each time, so \
             no request would ever be refused"
        }
        _ => {
            "`pools` takes the path of a `static`, not an expression: it would be evaluated on \
             every request, and pools built there would be new pools, with new slots, each time"
        }
    }
}

/// Parses the value of `wait`: a string such as `"250ms"` or `"2s"`, in
/// milliseconds.
fn parse_wait(input: ParseStream<'_>) -> syn::Result<u64> {
    let message = "`wait` takes a duration string in `ms` or `s`: write `wait = \"250ms\"`";
    if !input.peek(LitStr) {
        let expr: Expr = input.parse()?;
        return Err(syn::Error::new_spanned(&expr, message));
    }
    let lit: LitStr = input.parse()?;
    let text = lit.value();
    let (digits, scale) = match text.strip_suffix("ms") {
        Some(digits) => (digits, 1),
        None => (
            text.strip_suffix('s')
                .ok_or_else(|| syn::Error::new(lit.span(), message))?,
            1000,
        ),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&ms| ms > 0)
        .ok_or_else(|| syn::Error::new(lit.span(), message))
}

/// Parses the value of `wait_ms`: an integer literal of at least 1.
fn parse_wait_ms(input: ParseStream<'_>) -> syn::Result<u64> {
    let expr: Expr = input.parse()?;
    match &expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => match lit.base10_parse::<u64>()? {
            0 => Err(syn::Error::new(
                lit.span(),
                "`wait_ms = 0` never waits: remove it to fail fast, or give a bound like \
                 `wait_ms = 250`",
            )),
            ms => Ok(ms),
        },
        _ => Err(syn::Error::new_spanned(
            &expr,
            "`wait_ms` takes a whole number of milliseconds: write `wait_ms = 250`",
        )),
    }
}

/// Parses the value of `cost`: an integer literal from 1 to 255, the
/// slots of its class one request holds.
fn parse_cost(input: ParseStream<'_>) -> syn::Result<(u8, Span)> {
    let expr: Expr = input.parse()?;
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = &expr
    else {
        return Err(syn::Error::new_spanned(
            &expr,
            "`cost` takes a whole number of slots: write `cost = 4`",
        ));
    };
    match lit.base10_parse::<u64>()? {
        0 => Err(syn::Error::new(
            lit.span(),
            "`cost = 0` would hold no slot: a request holds at least 1, the default; \
             remove it, or give the slots the route holds, like `cost = 4`",
        )),
        cost => u8::try_from(cost)
            .map(|cost| (cost, lit.span()))
            .map_err(|_| {
                syn::Error::new(
                    lit.span(),
                    "`cost` is at most 255 slots; a cost above the class's capacity \
                 takes the whole class",
                )
            }),
    }
}

/// Records a `wait` or `wait_ms` key; only one of them may be given.
fn wait_key(seen: &mut Option<Span>, span: Span) -> syn::Result<()> {
    if seen.is_some() {
        return Err(syn::Error::new(
            span,
            "`wait`, `wait_ms` and `queue` each say how to wait for the lease: give only one of them",
        ));
    }
    *seen = Some(span);
    Ok(())
}

/// Accepts an `async fn` without `self` whose response type the attribute can
/// wrap; each other case gets its own message.
fn handler(item: Item, adapter: Adapter) -> syn::Result<ItemFn> {
    let function = match item {
        Item::Fn(function) => function,
        other => {
            let (what, tokens) = common::describe(&other);
            return Err(syn::Error::new_spanned(
                tokens,
                format!("`#[admitted]` belongs on an `async fn` handler, not on {what}"),
            ));
        }
    };

    let mut errors = Errors::default();
    if function.sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            function.sig.fn_token.span,
            "`#[admitted]` goes on an `async fn` handler: write `async fn`; the lease is taken \
             when the handler's future first runs",
        ));
    }
    if let Some(FnArg::Receiver(receiver)) = function.sig.inputs.first() {
        errors.push(syn::Error::new_spanned(
            receiver,
            format!(
                "`#[admitted]` does not support methods that take `self`: handlers are free \
                 functions; take the state as an extractor (e.g. `{}`) instead",
                adapter.state_extractor()
            ),
        ));
    }
    if let Some(sign) = foreign_sign(&function, adapter) {
        let (ours, theirs, import) = adapter.names();
        errors.push(syn::Error::new(
            sign.span(),
            format!(
                "this looks like an {theirs} handler (`{sign}`), but this `#[admitted]` is \
                 {ours}'s: its refusal is {ours}'s `Rejection`, which {theirs} cannot send. \
                 Import `{import}` instead"
            ),
        ));
    }
    match &function.sig.output {
        ReturnType::Default => errors.push(syn::Error::new(
            function.sig.paren_token.span.close(),
            format!(
                "`#[admitted]` needs the handler's response type, which it wraps in \
                 `Result<_, Rejection>`: write e.g. `-> String` or `-> {}`",
                adapter.response_trait()
            ),
        )),
        ReturnType::Type(_, ty) => errors.take(check_response_type(ty, adapter)).unwrap_or(()),
    }
    errors.finish()?;
    Ok(function)
}

/// The first sign in the handler's attributes (actix-web's route macros,
/// when they sit below `#[admitted]`) or signature that it was written for
/// the other adapter's framework.
fn foreign_sign(function: &ItemFn, adapter: Adapter) -> Option<Ident> {
    if matches!(adapter, Adapter::Axum) {
        const ROUTES: [&str; 11] = [
            "get", "post", "put", "delete", "patch", "head", "options", "trace", "connect",
            "route", "routes",
        ];
        for attr in &function.attrs {
            let path = attr.path();
            let last = path.segments.last()?;
            let actix = path.segments.len() == 1
                || path
                    .segments
                    .first()
                    .is_some_and(|s| s.ident == "actix_web");
            if actix && ROUTES.iter().any(|route| last.ident == route) {
                return Some(last.ident.clone());
            }
        }
    }
    let sig = &function.sig;
    let tokens = quote!(#sig);
    first_foreign(tokens, adapter, &mut None)
}

/// Walks `tokens` (groups included) for [`Adapter::is_foreign`].
fn first_foreign(
    tokens: TokenStream,
    adapter: Adapter,
    previous: &mut Option<String>,
) -> Option<Ident> {
    for tree in tokens {
        match tree {
            proc_macro2::TokenTree::Ident(ident) => {
                let name = ident.to_string();
                if adapter.is_foreign(previous.as_deref(), &name) {
                    return Some(ident);
                }
                *previous = Some(name);
            }
            proc_macro2::TokenTree::Group(group) => {
                if let Some(found) = first_foreign(group.stream(), adapter, previous) {
                    return Some(found);
                }
            }
            proc_macro2::TokenTree::Punct(punct) if punct.as_char() == ':' => {}
            proc_macro2::TokenTree::Punct(_) | proc_macro2::TokenTree::Literal(_) => {
                *previous = None;
            }
        }
    }
    None
}

/// Rejects return types that cannot be a response: `!` and futures.
fn check_response_type(ty: &Type, adapter: Adapter) -> syn::Result<()> {
    let response = adapter.response_trait();
    match ty {
        Type::Never(never) => Err(syn::Error::new(
            never.span(),
            format!(
                "a handler that never returns has no response to admit: `#[admitted]` needs a \
                 response type such as `String` or `{response}`"
            ),
        )),
        Type::Paren(inner) => check_response_type(&inner.elem, adapter),
        Type::Group(inner) => check_response_type(&inner.elem, adapter),
        Type::ImplTrait(bounds) => {
            for bound in &bounds.bounds {
                if let TypeParamBound::Trait(bound) = bound {
                    let last = bound.path.segments.last().map(|s| s.ident.to_string());
                    if matches!(last.as_deref(), Some("Future" | "IntoFuture")) {
                        return Err(syn::Error::new_spanned(
                            bound,
                            format!(
                                "an `async fn` already returns a future: write the response \
                                 type itself, e.g. `-> {response}`, not `-> impl Future<...>`"
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The handler, returning `Result<T, Rejection>` and running its body under
/// a lease of its class (a share of the request's own lease when a layer of
/// the same pools already took one).
fn generate(mut function: ItemFn, args: Args, adapter: Adapter) -> TokenStream {
    let krate = match args.krate {
        Some(path) => quote!(#path),
        None => adapter.default_crate(),
    };
    let private = quote!(#krate::__private);
    let Some((class, class_span)) = args.class else {
        unreachable!("parse_args rejects a missing `class`");
    };
    let class = match class {
        Class::Work => quote_spanned!(class_span=> #private::Class::Work),
        Class::Control => quote_spanned!(class_span=> #private::Class::Control),
    };
    let lease = Ident::new("__admission_lease", Span::mixed_site());
    let pools = Ident::new("__admission_pools", Span::mixed_site());
    // The pools are borrowed for `'static`, so a path to a `const` or to a
    // local fails to compile, spanned on the path. They are borrowed in a
    // block of their own: a borrow held across the `.await` below would make
    // the handler's future `Send` only for one lifetime, which axum's
    // `Handler` rejects.
    let take = match args.pools {
        Some(path) => quote_spanned! {path.span()=>
            let #pools: &'static #private::RequestPools = &#path;
        },
        None => quote! {
            let #pools: &'static #private::RequestPools = #private::RequestPools::global();
        },
    };

    let output = match &function.sig.output {
        ReturnType::Type(_, ty) => ty.clone(),
        ReturnType::Default => unreachable!("`handler` rejects a missing return type"),
    };
    let arrow = <Token![->]>::default();
    function.sig.output = ReturnType::Type(
        arrow,
        Box::new(syn::parse_quote_spanned! {output.span()=>
            ::core::result::Result<#output, #private::Rejection>
        }),
    );

    // The caller the handler's admissions are made for: the request's own
    // (its deadline kept) at the fixed criticality, when one is given, and
    // for the flow the route names, evaluated in the handler's scope and
    // hashed at once (the borrow ends with the statement), at the route's
    // cost.
    let caller = Ident::new("__admission_caller", Span::mixed_site());
    let named = args.criticality.is_some() || args.flow.is_some() || args.cost.is_some();
    let (set_caller, scoped) = if named {
        let mut made = quote!(#private::Caller::current());
        if let Some((level, span)) = args.criticality {
            let level = match level {
                Criticality::Critical => quote_spanned!(span=> Critical),
                Criticality::Default => quote_spanned!(span=> Default),
                Criticality::Sheddable => quote_spanned!(span=> Sheddable),
            };
            made = quote!(#made.with_criticality(#private::Criticality::#level));
        }
        if let Some(flow) = &args.flow {
            made = quote_spanned!(flow.span()=> #made.with_flow(&(#flow)));
        }
        if let Some((cost, span)) = args.cost {
            // Checked from 1 to 255 above: evaluated at compile time.
            made = quote_spanned!(span=>
                #made.with_cost(const { ::core::num::NonZeroU8::new(#cost).unwrap() })
            );
        }
        (quote!(let #caller = #made;), quote!(#caller.scope))
    } else {
        (quote!(), quote!(::core::convert::identity))
    };
    // A refusal becomes the adapter's `Rejection` through `?`. A waiting
    // future owns its clone of the pools (two `Arc`s), so no borrow is held
    // across the `.await`.
    let admit = match args.wait {
        Wait::FailFast if named => quote! {
            #caller.scope_sync(|| {
                #take
                #pools.try_lease(#class)
            })?
        },
        Wait::FailFast => quote! {
            {
                #take
                #pools.try_lease(#class)
            }?
        },
        Wait::Millis(ms) => quote! {
            #scoped({
                #take
                ::core::clone::Clone::clone(#pools)
            }
            .lease_with(
                #class,
                #private::Admission::WaitFor(::core::time::Duration::from_millis(#ms)),
            ))
            .await?
        },
        Wait::Queue => quote! {
            #scoped({
                #take
                ::core::clone::Clone::clone(#pools)
            }
            .lease_with(#class, #private::Admission::Queue))
            .await?
        },
    };
    let stmts = std::mem::take(&mut function.block.stmts);
    let body = quote!(async move { #(#stmts)* });
    // One scope for the lease and, when the route fixes it, the caller.
    let run = if named {
        quote!(#lease.scope_for(#caller, #body))
    } else {
        quote!(#lease.scope(#body))
    };
    *function.block = syn::parse_quote! {{
        #set_caller
        let #lease = #admit;
        ::core::result::Result::Ok(#run.await)
    }};
    quote!(#function)
}
