// The search's scoring (conf.py's html_search_scorer): Sphinx's own weights, the tutorials
// first, and among the pages that mention a term, the page that teaches it.
//
// - A reader who searches "KV cache" or "gradcheck" wants the page that teaches it before the
//   API entry that mentions it; an API entry still leads for its own name ("RotaryEmbedding"),
//   which it matches whole: objNameMatch (Sphinx's 11, raised to 30) and the object's priority
//   add up to more than a tutorial's boost and a word of its text.
// - Sphinx scores a page by its best-matching word alone: a page with "causal" in one heading
//   ties with the page that teaches the causal mask, and the tie is broken by the titles'
//   alphabetical order. So a page also gains for each word of the query in its own title
//   (pageTitleWord), and for the whole query, when it has several words, in one of its
//   headings (headingPhrase): "causal mask" finds "Building masks", whose heading is "The
//   causal mask", before the pages that use a causal mask under headings of their own.
var Scorer = {
  // query matches the full name of an object
  objNameMatch: 30,
  // or matches in the last dotted part of the object name
  objPartialMatch: 6,
  // Additive scores depending on the priority of the object
  objPrio: {
    0: 15, // used to be importantResults
    1: 5, // used to be objectResults
    2: -5, // used to be unimportantResults
  },
  //  Used when the priority is not in the mapping.
  objPrioDefault: 0,
  // query found in title
  title: 15,
  partialTitle: 7,
  // query found in terms
  term: 5,
  partialTerm: 2,

  // What a tutorial page adds to its score (not its index pages, nor the build's timings), and
  // what any page or section titled by the query adds: "computation times" or "references"
  // finds the page of that name first, not every tutorial that mentions it.
  tutorialBoost: 20,
  // What a page (not an API page, which its object's match ranks) adds for each word of the
  // query in its own title, and for the whole query in one of its headings.
  pageTitleWord: 10,
  headingPhrase: 6,

  // The query being scored, kept by the wrapper of Search._performSearch below.
  query: "",
  searchTerms: new Set(),
  _titleWords: new Map(),

  // The stemmed words of a page's title, as the index stems the query's.
  titleWords: (file) => {
    if (!Scorer._titleWords.has(file)) {
      const stemmer = new Stemmer();
      const title = Search._index.titles[file] || "";
      const words = splitQuery(title.toLowerCase()).map((w) => stemmer.stemWord(w));
      Scorer._titleWords.set(file, new Set(words));
    }
    return Scorer._titleWords.get(file);
  },

  // Whether one of the page's headings (its title included) holds the whole query.
  headingHolds: (file, phrase) =>
    Object.entries(Search._index.alltitles).some(
      ([heading, places]) =>
        heading.toLowerCase().includes(phrase) && places.some(([f]) => f === file),
    ),

  teaches: (docname) => {
    if (typeof Search === "undefined" || !Search._index || docname.startsWith("generated/"))
      return 0;
    const file = Search._index.docnames.indexOf(docname);
    if (file < 0) return 0;
    const titleWords = Scorer.titleWords(file);
    let gain = 0;
    Scorer.searchTerms.forEach((term) => {
      if (titleWords.has(term)) gain += Scorer.pageTitleWord;
    });
    const phrase = Scorer.query.toLowerCase().trim().replace(/\s+/g, " ");
    if (phrase.includes(" ") && Scorer.headingHolds(file, phrase)) gain += Scorer.headingPhrase;
    return gain;
  },

  score: (result) => {
    const [docname, , , , score, , kind] = result;
    const tutorial =
      docname.startsWith("tutorials/") &&
      !docname.endsWith("/index") &&
      !docname.endsWith("sg_execution_times");
    const boosted = (tutorial && kind !== "object") || kind === "title";
    const base = boosted ? score + Scorer.tutorialBoost : score;
    return kind === "object" ? base : base + Scorer.teaches(docname);
  },
};

// Keep the query and its stemmed terms for Scorer.score, which Sphinx calls with one result.
if (typeof Search !== "undefined" && !Search._performSearch.keepsQuery) {
  const perform = Search._performSearch;
  Search._performSearch = (query, searchTerms, ...rest) => {
    Scorer.query = query;
    Scorer.searchTerms = searchTerms;
    return perform(query, searchTerms, ...rest);
  };
  Search._performSearch.keepsQuery = true;
}
