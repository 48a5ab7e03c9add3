// adder-c is a Terrarium plugin in C, written from abi/ABI.md alone: one tool, add, that
// adds two integers. It is freestanding (no libc, no WASI): the Extism kernel is its
// only import. Build it with:
//
//	clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic -o plugin.wasm plugin.c
//
// A reactor: it has no _start, and exports the two functions of a tool plugin.

#define IMPORT(name) __attribute__((import_module("extism:host/env"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

typedef unsigned long long u64;
typedef long long i64;

IMPORT("input_length") u64 input_length(void);
IMPORT("input_load_u8") unsigned input_load_u8(u64 offset);
IMPORT("alloc") u64 alloc(u64 length);
IMPORT("store_u8") void store_u8(u64 offset, unsigned value);
IMPORT("output_set") void output_set(u64 offset, u64 length);
IMPORT("error_set") void error_set(u64 offset);

static u64 length(const char *s) {
	u64 n = 0;
	while (s[n]) n++;
	return n;
}

// block copies n bytes into a new kernel block.
static u64 block(const char *s, u64 n) {
	u64 off = alloc(n);
	for (u64 i = 0; i < n; i++) store_u8(off + i, (unsigned char)s[i]);
	return off;
}

static int output(const char *s, u64 n) {
	output_set(block(s, n), n);
	return 0;
}

// fail sets a protocol error; msg must need no JSON escaping.
static int fail(const char *code, const char *msg) {
	static char buf[256];
	u64 n = 0;
	const char *parts[] = {"{\"code\":\"", code, "\",\"message\":\"", msg, "\"}"};
	for (int p = 0; p < 5; p++)
		for (const char *c = parts[p]; *c && n < sizeof buf - 1; c++) buf[n++] = *c;
	buf[n] = 0;
	error_set(block(buf, n));
	return 1;
}

// The input, copied out of the kernel.
static char in[1 << 16];
static u64 in_len;

static int read_input(void) {
	in_len = input_length();
	if (in_len >= sizeof in) return 0;
	for (u64 i = 0; i < in_len; i++) in[i] = (char)input_load_u8(i);
	return 1;
}

// A JSON scanner over in: each function advances pos past what it reads and returns
// 0 when the text is not JSON.
static u64 pos;

static void ws(void) {
	while (pos < in_len && (in[pos] == ' ' || in[pos] == '\t' || in[pos] == '\n' || in[pos] == '\r')) pos++;
}

static int lit(const char *s) {
	for (; *s; s++, pos++)
		if (pos >= in_len || in[pos] != *s) return 0;
	return 1;
}

// string reads a string; start and end bound its raw contents (escapes kept).
static int string(u64 *start, u64 *end) {
	if (pos >= in_len || in[pos] != '"') return 0;
	*start = ++pos;
	while (pos < in_len && in[pos] != '"') {
		if ((unsigned char)in[pos] < 0x20) return 0;
		if (in[pos] == '\\') pos++;
		pos++;
	}
	if (pos >= in_len) return 0;
	*end = pos++;
	return 1;
}

// number reads a number; *integer says whether it is one that fits, in *v.
static int number(i64 *v, int *integer) {
	u64 start = pos;
	int neg = 0, digits = 0;
	*v = 0;
	*integer = 1;
	if (pos < in_len && in[pos] == '-') neg = 1, pos++;
	while (pos < in_len && in[pos] >= '0' && in[pos] <= '9') {
		if (*v > 100000000000000LL) *integer = 0;
		*v = *v * 10 + (in[pos++] - '0');
		digits++;
	}
	if (!digits) return 0;
	if (pos < in_len && (in[pos] == '.' || in[pos] == 'e' || in[pos] == 'E')) {
		*integer = 0;
		while (pos < in_len && ((in[pos] >= '0' && in[pos] <= '9') || in[pos] == '.' || in[pos] == 'e' ||
		                        in[pos] == 'E' || in[pos] == '+' || in[pos] == '-'))
			pos++;
	}
	if (neg) *v = -*v;
	return pos > start;
}

static int value(int depth);

// object reads an object, calling member for each key (at the value) unless it is 0.
static int object(int depth, int (*member)(u64 ks, u64 ke, int depth)) {
	u64 ks, ke;
	if (depth > 64 || !lit("{")) return 0;
	ws();
	if (pos < in_len && in[pos] == '}') return pos++, 1;
	for (;;) {
		ws();
		if (!string(&ks, &ke)) return 0;
		ws();
		if (!lit(":")) return 0;
		ws();
		if (member ? !member(ks, ke, depth + 1) : !value(depth + 1)) return 0;
		ws();
		if (pos < in_len && in[pos] == ',') { pos++; continue; }
		return lit("}");
	}
}

static int value(int depth) {
	u64 s, e;
	i64 v;
	int integer;
	if (depth > 64 || pos >= in_len) return 0;
	switch (in[pos]) {
	case '{': return object(depth, 0);
	case '[':
		pos++;
		ws();
		if (pos < in_len && in[pos] == ']') return pos++, 1;
		for (;;) {
			ws();
			if (!value(depth + 1)) return 0;
			ws();
			if (pos < in_len && in[pos] == ',') { pos++; continue; }
			return lit("]");
		}
	case '"': return string(&s, &e);
	case 't': return lit("true");
	case 'f': return lit("false");
	case 'n': return lit("null");
	}
	return number(&v, &integer);
}

static int key_is(u64 ks, u64 ke, const char *name) {
	u64 n = length(name);
	if (ke - ks != n) return 0;
	for (u64 i = 0; i < n; i++)
		if (in[ks + i] != name[i]) return 0;
	return 1;
}

// What the call's envelope and the tool's input hold.
static struct {
	int tool_add, tool_seen, input_seen, input_ok;
	int has_a, has_b, extra, bad_type;
	i64 a, b;
} call;

#define LIMIT 1000000000LL

static int input_member(u64 ks, u64 ke, int depth) {
	i64 v;
	int integer;
	int is_a = key_is(ks, ke, "a"), is_b = key_is(ks, ke, "b");
	if (!is_a && !is_b) {
		call.extra = 1;
		return value(depth);
	}
	if (pos >= in_len || (in[pos] != '-' && (in[pos] < '0' || in[pos] > '9'))) {
		call.bad_type = 1;
		return value(depth);
	}
	if (!number(&v, &integer)) return 0;
	if (!integer || v < -LIMIT || v > LIMIT) call.bad_type = 1;
	if (is_a) call.has_a = 1, call.a = v;
	else call.has_b = 1, call.b = v;
	return 1;
}

static int envelope_member(u64 ks, u64 ke, int depth) {
	u64 s, e;
	if (key_is(ks, ke, "tool")) {
		call.tool_seen = 1;
		if (!string(&s, &e)) return value(depth);
		call.tool_add = key_is(s, e, "add");
		return 1;
	}
	if (key_is(ks, ke, "input")) {
		call.input_seen = 1;
		if (pos < in_len && in[pos] == '{') {
			call.input_ok = 1;
			return object(depth, input_member);
		}
		return value(depth);
	}
	return value(depth);
}

static const char descriptor[] =
	"{\"abi\":1,\"name\":\"adder-c\",\"version\":\"1.0.0\","
	"\"description\":\"Adds integers (a plugin in C).\","
	"\"tools\":[{\"name\":\"add\",\"description\":\"Adds two integers.\","
	"\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"a\",\"b\"],"
	"\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-1000000000,\"maximum\":1000000000},"
	"\"b\":{\"type\":\"integer\",\"minimum\":-1000000000,\"maximum\":1000000000}}},"
	"\"outputSchema\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sum\"],"
	"\"properties\":{\"sum\":{\"type\":\"integer\"}}}}]}";

EXPORT("terrarium_describe") int terrarium_describe(void) {
	return output(descriptor, sizeof descriptor - 1);
}

EXPORT("terrarium_call_tool") int terrarium_call_tool(void) {
	static char out[64];
	if (!read_input()) return fail("limit_exceeded", "input too large");
	pos = 0;
	__builtin_memset(&call, 0, sizeof call);
	ws();
	if (pos >= in_len || in[pos] != '{' || !object(0, envelope_member)) return fail("invalid_input", "the input is not a JSON object");
	ws();
	if (pos != in_len) return fail("invalid_input", "text after the JSON object");
	if (!call.tool_seen) return fail("invalid_input", "no tool named");
	if (!call.tool_add) return fail("not_found", "no such tool");
	if (!call.input_ok) return fail("invalid_input", "input: want an object");
	if (call.extra) return fail("invalid_input", "input: only a and b are allowed");
	if (call.bad_type) return fail("invalid_input", "input: a and b must be integers within 1e9");
	if (!call.has_a || !call.has_b) return fail("invalid_input", "input: a and b are required");

	// {"output":{"sum":N}}
	i64 sum = call.a + call.b;
	char digits[24];
	int nd = 0, neg = sum < 0;
	u64 mag = neg ? (u64)(-sum) : (u64)sum;
	do digits[nd++] = (char)('0' + mag % 10), mag /= 10; while (mag);
	u64 n = 0;
	for (const char *c = "{\"output\":{\"sum\":"; *c; c++) out[n++] = *c;
	if (neg) out[n++] = '-';
	while (nd) out[n++] = digits[--nd];
	out[n++] = '}';
	out[n++] = '}';
	return output(out, n);
}
