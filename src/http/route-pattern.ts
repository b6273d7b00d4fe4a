/**
 * Which requests the middleware guards: path patterns (`/orders`, `/orders/:id`, `/files/*`), regular
 * expressions, or a predicate of the request.
 */
import { invalidOption } from "../core/option-checks.js";

const owner = "idempotencyMiddleware()";

/** Path patterns and expressions matched against the URL path, or a predicate of the whole request. */
export type RouteMatcher = readonly (string | RegExp)[] | ((request: Request) => boolean);

/** Compile `routes` into one predicate; `undefined` matches every path. */
export function compileRoutes(
  routes: RouteMatcher | undefined,
  option: string,
): (request: Request) => boolean {
  if (routes === undefined) return () => true;
  if (typeof routes === "function") return routes;
  if (!Array.isArray(routes)) invalidOption(owner, option, "must be an array of path patterns or a function");
  const expressions = routes.map((route, index) => {
    if (route instanceof RegExp) return route;
    if (typeof route !== "string" || !route.startsWith("/")) {
      invalidOption(owner, `${option}[${index}]`, 'must be a path pattern starting with "/", or a RegExp');
    }
    return patternToRegExp(route);
  });
  return (request) => {
    const path = new URL(request.url).pathname;
    return expressions.some((expression) => expression.test(path));
  };
}

/**
 * `/orders/:id` matches one segment for `:id`; a final `/*` matches the rest of the path (or nothing);
 * a trailing slash is optional. Everything else is literal.
 */
function patternToRegExp(pattern: string): RegExp {
  const segments = pattern.replace(/\/+$/, "").split("/").slice(1);
  let source = "";
  segments.forEach((segment, index) => {
    if (segment === "*" && index === segments.length - 1) source += "(?:/.*)?";
    else if (segment.startsWith(":") && segment.length > 1) source += "/[^/]+";
    else source += `/${segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`;
  });
  return new RegExp(`^${source}/?$`);
}
