// A small syntax highlighter of our own for Python, JavaScript/TypeScript and
// shell: one pass with a sticky regular expression per language; comments,
// strings, numbers, keywords and called names become <span class="tk-?">.
// Output is built from text nodes, so code can never become markup.

const PY_KW = 'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case print self';
const JS_KW = 'async await break case catch class const continue debugger default delete do else export extends false finally for function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield interface type enum implements private public readonly';
const SH_KW = 'if then else elif fi case esac for while until do done in function return exit export local readonly echo cd ls cat grep sed awk set unset source true false';

function words(list) {
  return new Set(list.split(' '));
}

const LANGS = {
  python: {
    kw: words(PY_KW),
    re: /(#[^\n]*)|("""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|[rbfuRBFU]{0,2}"(?:\\.|[^"\\\n])*"?|[rbfuRBFU]{0,2}'(?:\\.|[^'\\\n])*'?)|(\b(?:0[xob][\da-fA-F_]+|\d[\d_]*(?:\.\d*)?(?:e[+-]?\d+)?j?)\b)|([A-Za-z_]\w*)(?=\s*\()|([A-Za-z_]\w*)/y,
  },
  javascript: {
    kw: words(JS_KW),
    re: /(\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$))|(`(?:\\[\s\S]|[^`\\])*`?|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?)|(\b(?:0[xob][\da-fA-F_]+|\d[\d_]*(?:\.\d*)?(?:e[+-]?\d+)?n?)\b)|([A-Za-z_$][\w$]*)(?=\s*\()|([A-Za-z_$][\w$]*)/y,
  },
  bash: {
    kw: words(SH_KW),
    re: /((?:^|(?<=\s))#[^\n]*)|("(?:\\.|[^"\\])*"?|'[^']*'?|\$\{[^}\n]*\}?|\$[A-Za-z_]\w*|\$[0-9#?@*$!-])|(\b\d+\b)|([A-Za-z_][\w-]*)(?=\s*\(\))|([A-Za-z_][\w.-]*)/y,
  },
};
LANGS.typescript = LANGS.javascript;
LANGS.sh = LANGS.bash;

export function highlightable(lang) {
  return Object.hasOwn(LANGS, lang);
}

// Appends the highlighted `code` to `target` (a <pre> or <code>).
export function highlight(code, lang, target) {
  const spec = LANGS[lang];
  const frag = document.createDocumentFragment();
  if (!spec) {
    frag.append(code);
    target.append(frag);
    return target;
  }
  const re = spec.re;
  let plain = '';
  const flush = () => {
    if (plain) frag.append(plain);
    plain = '';
  };
  const span = (cls, text) => {
    flush();
    const s = document.createElement('span');
    s.className = cls;
    s.textContent = text;
    frag.append(s);
  };
  let i = 0;
  while (i < code.length) {
    re.lastIndex = i;
    const m = re.exec(code);
    if (!m || m[0].length === 0) {
      plain += code[i++];
      continue;
    }
    if (m[1] !== undefined) span('tk-c', m[0]);
    else if (m[2] !== undefined) span('tk-s', m[0]);
    else if (m[3] !== undefined) span('tk-n', m[0]);
    else if (m[4] !== undefined) (spec.kw.has(m[4]) ? span('tk-k', m[0]) : span('tk-f', m[0]));
    else if (spec.kw.has(m[5])) span('tk-k', m[0]);
    else plain += m[0];
    i += m[0].length;
  }
  flush();
  target.append(frag);
  return target;
}
