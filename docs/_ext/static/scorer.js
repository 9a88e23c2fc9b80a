// The search's scoring (conf.py's html_search_scorer): Sphinx's own weights, and the tutorials
// first. A reader who searches "KV cache" or "gradcheck" wants the page that teaches it before
// the API entry that mentions it; an API entry still leads for its own name ("RotaryEmbedding"),
// which it matches whole: objNameMatch (Sphinx's 11, raised to 30) and the object's priority
// add up to more than a tutorial's boost and a word of its text.
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
  score: (result) => {
    const [docname, , , , score, , kind] = result;
    const tutorial =
      docname.startsWith("tutorials/") &&
      !docname.endsWith("/index") &&
      !docname.endsWith("sg_execution_times");
    const boosted = (tutorial && kind !== "object") || kind === "title";
    return boosted ? score + Scorer.tutorialBoost : score;
  },
};
