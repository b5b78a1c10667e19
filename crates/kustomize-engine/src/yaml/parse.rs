//! Reads YAML streams into JSON values with Kubernetes' scalar rules.
//!
//! granit-parser supplies the events; this module builds `crate::value::Value`s from them:
//! plain scalars resolve by the chosen [`Schema`], quoted and block scalars are strings,
//! anchors and aliases are expanded, `<<` merge keys are applied (explicit keys win), and a
//! key repeated in one mapping is an error, as in go-yaml.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use crate::value::{Map, Value};
use granit_parser::{Event, Options, Parser, ScalarStyle, StructureStyle, Tag};

use super::YamlError;
use super::emit::Ordered;
use super::goyaml::{go_yaml_folded, go_yaml_line_breaks, kyaml_stream, refuse_yaml_1_2_escapes};
use super::scalar::{
    Resolved, Schema, decode_binary, resolve_plain, resolve_tagged, to_json, yaml_to_json_key,
};

/// Every document of a YAML stream, in order. Empty documents come back as `Value::Null`.
pub fn parse_documents(text: &str, schema: Schema) -> Result<Vec<Value>, YamlError> {
    build_documents(text, schema, false)
}

/// [`parse_documents`] of a text kustomize reads as a stream of manifests (kyaml's reader:
/// a transformer's or generator's configs), which refuses more on separator lines.
pub fn parse_kio_documents(text: &str, schema: Schema) -> Result<Vec<Value>, YamlError> {
    let text = &*kyaml_stream(text)?;
    parse_documents(text, schema)
}

/// [`parse_documents`], where a key written twice in one mapping takes its last value instead
/// of being an error: kustomize reads kustomization files so (resources it refuses).
pub fn parse_documents_last_key_wins(text: &str, schema: Schema) -> Result<Vec<Value>, YamlError> {
    let mut builder = Builder::new(schema, false);
    builder.last_key_wins = true;
    builder.read(&go_yaml_line_breaks(text))
}

/// Every document of a YAML stream with mapping keys in document order, for formats whose
/// meaning depends on that order (SOPS hashes values in the order they are written).
pub fn parse_documents_ordered(text: &str, schema: Schema) -> Result<Vec<Ordered>, YamlError> {
    build_documents(text, schema, false)
}

/// Kubernetes objects as kustomize reads resource files: kyaml's scalar rules, and each
/// object's `metadata.annotations` as the text they were written as (kustomize ends every
/// build by writing annotations back from their text: `0755` stays "0755", `~` "~").
pub fn parse_resources(text: &str) -> Result<Vec<Resource>, YamlError> {
    let text = &*kyaml_stream(text)?;
    let mut builder = Builder::new(Schema::Kyaml, true);
    builder.track_empty_values = true;
    let documents = builder.read_tracked(&go_yaml_line_breaks(text))?;
    Ok(documents
        .into_iter()
        .map(|(value, empty_values)| Resource {
            value,
            empty_values,
        })
        .collect())
}

/// Patch documents as kustomize reads them: a plain mapping key that reads as a number or a
/// boolean (`6443:`) is taken as its text, as the merge compares keys by their text, and its
/// JSON pointer is kept ([`Patch::number_keys`]) so that one the merge cannot lay onto an
/// existing key is refused as kustomize's build refuses it. Such a key under a list is still
/// an error. Annotation values are their text, as in [`parse_resources`] (`8080` is "8080"),
/// but a plain null still removes one.
pub fn parse_patches(text: &str) -> Result<Vec<Patch>, YamlError> {
    let text = &*kyaml_stream(text)?;
    let mut builder = Builder::new(Schema::Kyaml, true);
    builder.annotation_nulls_stay = true;
    builder.track_number_keys = true;
    builder.track_null_spellings = true;
    let read = builder.read_all(&go_yaml_line_breaks(text))?;
    Ok(read
        .documents
        .into_iter()
        .zip(read.number_keys)
        .zip(read.null_spellings)
        .map(|((value, number_keys), null_spellings)| Patch {
            value,
            number_keys,
            null_spellings,
        })
        .collect())
}

/// A JSON pointer's escaping of one key.
pub fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A document read by [`parse_patches`].
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub value: Value,
    /// JSON pointers of the keys written as numbers or booleans, read as their text.
    pub number_keys: Vec<String>,
    /// JSON pointers and texts of the nulls not written `null` (`~`, nothing, `Null`): a
    /// targeted patch's labels and annotations are read back as their text.
    pub null_spellings: Vec<(String, String)>,
}

/// A document read by [`parse_resources`].
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub value: Value,
    /// JSON pointers of the mapping fields written with no value at all (`key:`), which
    /// kustomize tells apart from `key: null`: a strategic merge patch drops them.
    pub empty_values: Vec<String>,
}

fn build_documents<T: Tree>(
    text: &str,
    schema: Schema,
    annotations_as_text: bool,
) -> Result<Vec<T>, YamlError> {
    Builder::new(schema, annotations_as_text).read(&go_yaml_line_breaks(text))
}

impl<T: Tree> Builder<T> {
    fn new(schema: Schema, annotations_as_text: bool) -> Builder<T> {
        Builder {
            schema,
            track_empty_values: false,
            empty_values: Vec::new(),
            document_empty_values: Vec::new(),
            track_number_keys: false,
            number_keys: Vec::new(),
            document_number_keys: Vec::new(),
            track_null_spellings: false,
            null_spellings: Vec::new(),
            document_null_spellings: Vec::new(),
            annotations_as_text,
            annotation_nulls_stay: false,
            last_key_wins: false,
            keys_as_yaml_to_json: false,
            anchors: HashMap::new(),
            alias_nodes: 0,
            stack: Vec::new(),
            documents: Vec::new(),
        }
    }

    /// [`read`](Self::read), each document with the empty values it holds.
    fn read_tracked(self, text: &str) -> Result<Vec<(T, Vec<String>)>, YamlError> {
        let read = self.read_all(text)?;
        Ok(read.documents.into_iter().zip(read.empty_values).collect())
    }

    fn read(self, text: &str) -> Result<Vec<T>, YamlError> {
        Ok(self.read_all(text)?.documents)
    }

    /// Every document, and the pointers of the empty values of each.
    fn read_all(mut self, text: &str) -> Result<DocumentsRead<T>, YamlError> {
        let builder = &mut self;
        // Comments are data only for an edited document (`super::document`).
        let mut options = Options::default();
        options.set_emit_comments(false);
        // libyaml reads a BOM inside a document as a character of the scalar it starts (a
        // substituted value from a file saved with one).
        options.bom_inside_document_as_content = true;
        // go-yaml ends a block scalar whose last line ends the text without a line break with no
        // break either (`|` reads as `|-`).
        options.block_scalar_eof_without_line_feed = true;
        // Only a text with `\/` somewhere needs its double-quoted scalars looked at.
        let may_escape_slash = text.contains("\\/");
        let mut parser = Parser::new_from_str_with_options(text, options);
        while let Some(event) = parser.next_event() {
            let (mut event, span) = event.map_err(|e| YamlError::Syntax {
                line: e.marker().line(),
                column: e.marker().col() + 1,
                message: e.info().to_string(),
            })?;
            if may_escape_slash
                && let Event::Scalar(_, ScalarStyle::DoubleQuoted, ..) = &event
                && let Some(bytes) = span.byte_range()
            {
                refuse_yaml_1_2_escapes(text, bytes.start, bytes.end)?;
            }
            // kyaml writes a folded scalar back folded and reads it again, which adds the break;
            // sigs.k8s.io/yaml reads it once.
            if let Event::Scalar(value, ScalarStyle::Folded, ..) = &mut event
                && builder.schema == Schema::Kyaml
                && let Some(refolded) = go_yaml_folded(value)
            {
                *value = refolded.into();
            }
            // The parser writes an empty value (`key:`) as `~`; its text is empty.
            if let Event::Scalar(value, ScalarStyle::Plain, ..) = &mut event
                && span.start.index() == span.end.index()
            {
                *value = std::borrow::Cow::Borrowed("");
            }
            builder.event(event, span.start.line())?;
        }
        Ok(DocumentsRead {
            documents: self.documents,
            empty_values: self.document_empty_values,
            number_keys: self.document_number_keys,
            null_spellings: self.document_null_spellings,
        })
    }
}

/// A YAML text as sigs.k8s.io/yaml's `YAMLToJSON` reads it (Flux reads its substituted
/// manifests so): the Kubernetes schema, a key written twice takes its last value (go-yaml v2
/// fills a map), and plain keys are named as [`yaml_to_json_key`] names them; a key with no
/// JSON name is an error.
pub fn parse_yaml_to_json(text: &str) -> Result<Value, YamlError> {
    let mut builder = Builder::new(Schema::Kubernetes, false);
    builder.last_key_wins = true;
    builder.keys_as_yaml_to_json = true;
    let documents = builder.read(&go_yaml_line_breaks(text))?;
    Ok(documents.into_iter().next().unwrap_or(Value::Null))
}

/// The single document of a YAML text; several documents are an error, none is `Null`.
pub fn parse_single(text: &str, schema: Schema) -> Result<Value, YamlError> {
    let mut documents = parse_documents(text, schema)?;
    match documents.len() {
        0 => Ok(Value::Null),
        1 => Ok(documents.remove(0)),
        n => Err(YamlError::MultipleDocuments { count: n }),
    }
}

/// The deepest nesting of mappings and sequences accepted.
pub const MAX_DEPTH: usize = 256;

/// The most nodes aliases may add to one document.
pub const MAX_ALIAS_NODES: usize = 1_000_000;

/// An anchored value, measured once for the alias budget.
struct Anchored<T> {
    value: T,
    nodes: usize,
    depth: usize,
}

impl<T: Tree> Anchored<T> {
    fn of(value: &T) -> Anchored<T> {
        let (nodes, depth) = value.measure();
        Anchored {
            value: value.clone(),
            nodes,
            depth,
        }
    }
}

/// Node count and nesting depth of a value.
fn measure(value: &Value) -> (usize, usize) {
    match value {
        Value::Array(items) => items
            .iter()
            .map(measure)
            .fold((1, 1), |(n, d), (cn, cd)| (n + cn, d.max(cd + 1))),
        Value::Object(map) => map
            .values()
            .map(measure)
            .fold((1, 1), |(n, d), (cn, cd)| (n + cn, d.max(cd + 1))),
        _ => (1, 0),
    }
}

enum Frame<T: Tree> {
    Sequence {
        items: Vec<T>,
        anchor: usize,
        flow: bool,
    },
    Mapping {
        map: T::Entries,
        /// Keys written in this mapping (as opposed to merged in through `<<`).
        explicit: BTreeSet<String>,
        pending_key: Option<(String, usize)>,
        anchor: usize,
        flow: bool,
    },
}

/// What [`Builder::read_all`] reads: the documents, and what each one's tracking recorded.
struct DocumentsRead<T> {
    documents: Vec<T>,
    empty_values: Vec<Vec<String>>,
    number_keys: Vec<Vec<String>>,
    null_spellings: Vec<Vec<(String, String)>>,
}

struct Builder<T: Tree> {
    schema: Schema,
    /// Record where mapping fields have no value at all, and read one in a flow collection
    /// (`{key: }`) as "" ([`parse_resources`]).
    track_empty_values: bool,
    empty_values: Vec<String>,
    document_empty_values: Vec<Vec<String>>,
    /// Read keys written as numbers or booleans as their text ([`parse_patches`]).
    track_number_keys: bool,
    number_keys: Vec<String>,
    document_number_keys: Vec<Vec<String>>,
    /// Record where a null is not spelled `null` ([`parse_patches`]).
    track_null_spellings: bool,
    null_spellings: Vec<(String, String)>,
    document_null_spellings: Vec<Vec<(String, String)>>,
    /// A key written twice takes its last value ([`parse_documents_last_key_wins`]).
    last_key_wins: bool,
    /// Plain keys are named as `YAMLToJSON` names them ([`parse_yaml_to_json`]).
    keys_as_yaml_to_json: bool,
    /// Read annotation values as their text ([`parse_resources`], [`parse_patches`]).
    annotations_as_text: bool,
    /// ... except a plain null, which a patch uses to remove the annotation.
    annotation_nulls_stay: bool,
    /// Anchored values with their node count and depth, for the alias budget.
    anchors: HashMap<usize, Anchored<T>>,
    /// Nodes added to this document by expanding aliases.
    alias_nodes: usize,
    stack: Vec<Frame<T>>,
    documents: Vec<T>,
}

impl<T: Tree> Builder<T> {
    fn event(&mut self, event: Event<'_>, line: usize) -> Result<(), YamlError> {
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentStart(..) => Ok(()),
            Event::DocumentEnd => {
                self.anchors.clear();
                self.alias_nodes = 0;
                Ok(())
            }
            Event::Alias(id) => self.alias(id, line),
            Event::Scalar(text, style, anchor, tag) => {
                self.scalar_event(&text, style, anchor, tag, line)
            }
            Event::SequenceStart(style, anchor, _) => {
                self.ensure_not_key(line)?;
                self.ensure_depth(line)?;
                self.stack.push(Frame::Sequence {
                    items: Vec::new(),
                    anchor,
                    flow: style == StructureStyle::Flow,
                });
                Ok(())
            }
            Event::MappingStart(style, anchor, _) => {
                self.ensure_not_key(line)?;
                self.ensure_depth(line)?;
                self.stack.push(Frame::Mapping {
                    map: T::Entries::default(),
                    explicit: BTreeSet::new(),
                    pending_key: None,
                    anchor,
                    flow: style == StructureStyle::Flow,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (mut value, anchor) = match self.stack.pop() {
                    Some(Frame::Sequence { items, anchor, .. }) => (T::sequence(items), anchor),
                    Some(Frame::Mapping { map, anchor, .. }) => (T::mapping(map), anchor),
                    None => return Ok(()),
                };
                if self.in_annotations() {
                    // A collection's text, as kustomize reads an annotation, is empty.
                    value = T::scalar(Value::String(String::new()));
                }
                if anchor != 0 {
                    self.anchors.insert(anchor, Anchored::of(&value));
                }
                self.complete(value, line)
            }
            _ => Ok(()),
        }
    }

    /// An alias repeats its anchored value. Aliases multiply what a small text expands to
    /// ("billion laughs"); both the nesting they add and the nodes they copy are bounded.
    fn alias(&mut self, id: usize, line: usize) -> Result<(), YamlError> {
        let anchored = self
            .anchors
            .get(&id)
            .ok_or(YamlError::UnknownAlias { line })?;
        if self.stack.len() + anchored.depth > MAX_DEPTH {
            return Err(YamlError::TooDeep {
                line,
                limit: MAX_DEPTH,
            });
        }
        self.alias_nodes += anchored.nodes;
        if self.alias_nodes > MAX_ALIAS_NODES {
            return Err(YamlError::AliasBudget {
                line,
                limit: MAX_ALIAS_NODES,
            });
        }
        let value = anchored.value.clone();
        self.complete(value, line)
    }

    /// A scalar read as a mapping's key: its text, refused where go-yaml's reading would give a
    /// key JSON cannot hold.
    fn mapping_key(
        &mut self,
        text: &str,
        style: ScalarStyle,
        tag: Option<Cow<'_, Tag>>,
        line: usize,
    ) -> Result<String, YamlError> {
        // Resources must have string keys: go-yaml v3 reads `1:` as an integer key, which
        // JSON cannot hold.
        let schema = self.schema;
        // A tagged key is decoded as a value would be (a tag its text does not resolve to
        // fails); one that is no string then is none for JSON either.
        let core_tag = tag
            .as_deref()
            .and_then(|t| t.suffix_in_namespace("tag:yaml.org,2002:"))
            .filter(|core| core != "str");
        let tagged_non_string = match core_tag {
            Some(_) => !matches!(
                self.scalar(text, style, tag.clone(), line)?,
                Value::String(_)
            ),
            None => false,
        };
        // go-yaml v3 decodes a null key as nil, which JSON cannot hold either; a patch's
        // keys are matched by their text.
        let plain_non_string = schema == Schema::Kyaml
            && style == ScalarStyle::Plain
            && tag.is_none()
            && match resolve_plain(text, schema) {
                Resolved::Str => false,
                Resolved::Null => !self.track_number_keys,
                _ => true,
            };
        if schema == Schema::Kyaml && (tagged_non_string || plain_non_string) {
            let under_a_list = self
                .stack
                .iter()
                .any(|frame| matches!(frame, Frame::Sequence { .. }));
            if !self.track_number_keys || under_a_list {
                return Err(YamlError::NonStringKey {
                    key: text.to_string(),
                    line,
                });
            }
            let pointer = self.pointer_to(text);
            self.number_keys.push(pointer);
        }
        if self.keys_as_yaml_to_json
            && ((style == ScalarStyle::Plain && tag.is_none()) || tagged_non_string)
        {
            return yaml_to_json_key(text).ok_or_else(|| YamlError::NonStringKey {
                key: text.to_string(),
                line,
            });
        }
        Ok(text.to_string())
    }

    /// A scalar is a mapping's pending key or a value.
    fn scalar_event(
        &mut self,
        text: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<Cow<'_, Tag>>,
        line: usize,
    ) -> Result<(), YamlError> {
        if let Some(Frame::Mapping {
            pending_key: None, ..
        }) = self.stack.last()
        {
            let key = self.mapping_key(text, style, tag, line)?;
            if let Some(Frame::Mapping { pending_key, .. }) = self.stack.last_mut() {
                *pending_key = Some((key, line));
            }
            return Ok(());
        }
        let empty = self.track_empty_values && text.is_empty() && style == ScalarStyle::Plain;
        if empty {
            self.record_empty_value();
        }
        if self.track_null_spellings
            && style == ScalarStyle::Plain
            && tag.is_none()
            && text != "null"
            && resolve_plain(text, self.schema) == Resolved::Null
        {
            let pointer = Self::pointer_of(&self.stack);
            self.null_spellings.push((pointer, text.to_string()));
        }
        // kustomize prints a resource by writing it as YAML and reading that back: an empty
        // value in a flow collection cannot be written plain there, so it is written `''`
        // and comes back a string.
        let in_flow = || {
            matches!(
                self.stack.last(),
                Some(Frame::Mapping { flow: true, .. } | Frame::Sequence { flow: true, .. })
            )
        };
        let value = if empty && tag.is_none() && in_flow() {
            T::scalar(Value::String(String::new()))
        } else if self.in_annotations() {
            let null = self.annotation_nulls_stay
                && style == ScalarStyle::Plain
                && tag.is_none()
                && resolve_plain(text, self.schema) == Resolved::Null;
            T::scalar(if null {
                Value::Null
            } else {
                Value::String(text.to_string())
            })
        } else {
            T::scalar(self.scalar(text, style, tag, line)?)
        };
        if anchor != 0 {
            self.anchors.insert(anchor, Anchored::of(&value));
        }
        self.complete(value, line)
    }

    /// The JSON pointer of `frames`: each sequence's position, each mapping's pending key.
    fn pointer_of(frames: &[Frame<T>]) -> String {
        let mut pointer = String::new();
        for frame in frames {
            pointer.push('/');
            match frame {
                Frame::Sequence { items, .. } => pointer.push_str(&items.len().to_string()),
                Frame::Mapping { pending_key, .. } => {
                    let key = pending_key.as_ref().map_or("", |(key, _)| key.as_str());
                    pointer.push_str(&escape_pointer(key));
                }
            }
        }
        pointer
    }

    /// The JSON pointer of the key `key` of the mapping being read.
    fn pointer_to(&self, key: &str) -> String {
        let above = &self.stack[..self.stack.len().saturating_sub(1)];
        format!("{}/{}", Self::pointer_of(above), escape_pointer(key))
    }

    /// Notes the JSON pointer of the mapping field being read, whose value is empty.
    fn record_empty_value(&mut self) {
        if !matches!(
            self.stack.last(),
            Some(Frame::Mapping {
                pending_key: Some(_),
                ..
            })
        ) {
            return;
        }
        let pointer = Self::pointer_of(&self.stack);
        self.empty_values.push(pointer);
    }

    /// Whether the value being read is one of an object's `metadata.annotations`, to be read
    /// as its text ([`parse_resources`]).
    fn in_annotations(&self) -> bool {
        let pending = |frame: &Frame<T>, key: Option<&str>| match frame {
            Frame::Mapping {
                pending_key: Some((pending, _)),
                ..
            } => key.is_none_or(|key| pending == key),
            _ => false,
        };
        self.annotations_as_text
            && self.stack.len() == 3
            && pending(&self.stack[0], Some("metadata"))
            && pending(&self.stack[1], Some("annotations"))
            && pending(&self.stack[2], None)
    }

    /// Values are processed recursively downstream (merging, printing, dropping), so nesting
    /// is bounded far above anything a Kubernetes object needs.
    fn ensure_depth(&self, line: usize) -> Result<(), YamlError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError::TooDeep {
                line,
                limit: MAX_DEPTH,
            });
        }
        Ok(())
    }

    /// Collections and aliases cannot be mapping keys in Kubernetes objects.
    fn ensure_not_key(&self, line: usize) -> Result<(), YamlError> {
        match self.stack.last() {
            Some(Frame::Mapping {
                pending_key: None, ..
            }) => Err(YamlError::ComplexKey { line }),
            _ => Ok(()),
        }
    }

    fn scalar(
        &self,
        text: &str,
        style: ScalarStyle,
        tag: Option<Cow<'_, Tag>>,
        line: usize,
    ) -> Result<Value, YamlError> {
        // go-yaml knows YAML 1.1's `!!binary` and `!!timestamp` beside the core schema's tags.
        let core_tag = tag
            .as_deref()
            .and_then(|t| t.suffix_in_namespace("tag:yaml.org,2002:"));
        // go-yaml resolves only untagged scalars and the core tags; any other tag (`!foo`,
        // `!!set`, `!<tag:example.com,2000:x>`) leaves the text a string. The non-specific
        // `!` reads as no tag for go-yaml v3, as another tag for v2.
        let non_specific = tag
            .as_deref()
            .is_some_and(|t| t.handle().is_empty() && t.suffix() == "!");
        let untagged = tag.is_none() || (non_specific && self.schema == Schema::Kyaml);
        let resolved = match (core_tag.as_deref(), style) {
            (Some("str"), _) => Resolved::Str,
            (Some("binary"), _) => return decode_binary(text, line),
            (Some(tag @ ("null" | "bool" | "int" | "float" | "timestamp")), _) => {
                resolve_tagged(text, tag, self.schema, line)?
            }
            (_, ScalarStyle::Plain) if untagged => resolve_plain(text, self.schema),
            _ => Resolved::Str,
        };
        to_json(resolved, text).ok_or_else(|| YamlError::UnsupportedValue {
            value: text.to_string(),
            line,
        })
    }

    fn complete(&mut self, value: T, line: usize) -> Result<(), YamlError> {
        match self.stack.last_mut() {
            None => {
                self.documents.push(value);
                self.document_empty_values
                    .push(std::mem::take(&mut self.empty_values));
                self.document_number_keys
                    .push(std::mem::take(&mut self.number_keys));
                self.document_null_spellings
                    .push(std::mem::take(&mut self.null_spellings));
                Ok(())
            }
            Some(Frame::Sequence { items, .. }) => {
                items.push(value);
                Ok(())
            }
            Some(Frame::Mapping {
                pending_key: None, ..
            }) => {
                // Only reachable for an alias used as a key.
                Err(YamlError::ComplexKey { line })
            }
            Some(Frame::Mapping {
                map,
                explicit,
                pending_key,
                ..
            }) => {
                let (key, key_line) = pending_key.take().unwrap_or_default();
                if key == "<<" {
                    return merge_into(map, explicit, value, key_line);
                }
                if !explicit.insert(key.clone()) && !self.last_key_wins {
                    return Err(YamlError::DuplicateKey {
                        key,
                        line: key_line,
                    });
                }
                T::insert(map, key, value);
                Ok(())
            }
        }
    }
}

/// Applies a `<<` merge: a mapping or a list of mappings whose keys fill in what the mapping
/// does not set itself.
fn merge_into<T: Tree>(
    map: &mut T::Entries,
    explicit: &BTreeSet<String>,
    value: T,
    line: usize,
) -> Result<(), YamlError> {
    let sources = match value.into_collection() {
        Collection::Mapping(entries) => vec![entries],
        Collection::Sequence(items) => items
            .into_iter()
            .map(|item| match item.into_collection() {
                Collection::Mapping(entries) => Ok(entries),
                _ => Err(YamlError::InvalidMerge { line }),
            })
            .collect::<Result<_, _>>()?,
        Collection::Neither => return Err(YamlError::InvalidMerge { line }),
    };
    for source in sources {
        for (key, value) in source {
            if !explicit.contains(&key) && !T::contains(map, &key) {
                T::insert(map, key, value);
            }
        }
    }
    Ok(())
}

/// What a `<<` merge value turned out to be.
enum Collection<T> {
    Mapping(Vec<(String, T)>),
    Sequence(Vec<T>),
    Neither,
}

/// The value trees the builder can produce: sorted JSON objects for the resource pipeline,
/// [`Ordered`] trees where key order carries meaning.
trait Tree: Clone + Sized {
    type Entries: Default;
    fn scalar(value: Value) -> Self;
    fn sequence(items: Vec<Self>) -> Self;
    fn mapping(map: Self::Entries) -> Self;
    fn insert(map: &mut Self::Entries, key: String, value: Self);
    fn contains(map: &Self::Entries, key: &str) -> bool;
    fn into_collection(self) -> Collection<Self>;
    /// Node count and nesting depth.
    fn measure(&self) -> (usize, usize);
}

impl Tree for Value {
    type Entries = Map;
    fn scalar(value: Value) -> Self {
        value
    }
    fn sequence(mut items: Vec<Self>) -> Self {
        // A parsed collection is done growing; most objects are read once and kept whole.
        items.shrink_to_fit();
        Value::Array(items)
    }
    fn mapping(mut map: Self::Entries) -> Self {
        map.shrink_to_fit();
        Value::Object(map)
    }
    fn insert(map: &mut Self::Entries, key: String, value: Self) {
        map.insert(key, value);
    }
    fn contains(map: &Self::Entries, key: &str) -> bool {
        map.contains_key(key)
    }
    fn into_collection(self) -> Collection<Self> {
        match self {
            Value::Object(map) => Collection::Mapping(map.into_iter().collect()),
            Value::Array(items) => Collection::Sequence(items),
            _ => Collection::Neither,
        }
    }
    fn measure(&self) -> (usize, usize) {
        measure(self)
    }
}

impl Tree for Ordered {
    type Entries = Vec<(String, Ordered)>;
    fn scalar(value: Value) -> Self {
        Ordered::Scalar(value)
    }
    fn sequence(items: Vec<Self>) -> Self {
        Ordered::Seq(items)
    }
    fn mapping(map: Self::Entries) -> Self {
        Ordered::Map(map)
    }
    fn insert(map: &mut Self::Entries, key: String, value: Self) {
        map.push((key, value));
    }
    fn contains(map: &Self::Entries, key: &str) -> bool {
        map.iter().any(|(k, _)| k == key)
    }
    fn into_collection(self) -> Collection<Self> {
        match self {
            Ordered::Map(entries) => Collection::Mapping(entries),
            Ordered::Seq(items) => Collection::Sequence(items),
            Ordered::Scalar(_) => Collection::Neither,
        }
    }
    fn measure(&self) -> (usize, usize) {
        match self {
            Ordered::Scalar(_) => (1, 1),
            Ordered::Seq(items) => items
                .iter()
                .map(Tree::measure)
                .fold((1, 1), |(n, d), (cn, cd)| (n + cn, d.max(cd + 1))),
            Ordered::Map(entries) => entries
                .iter()
                .map(|(_, v)| v.measure())
                .fold((1, 1), |(n, d), (cn, cd)| (n + cn, d.max(cd + 1))),
        }
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
