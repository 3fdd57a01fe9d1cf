"""The demo world's static tables: countries with their cities, occupations, months, biography templates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

FLAT = 0.5  # Zipf exponent for countries other than the United Kingdom


def _zipf(cities: Sequence[str], exponent: float = FLAT) -> tuple[tuple[str, float], ...]:
    """Zipf weights by rank within a country, normalised to sum to 1."""
    raw = [1.0 / (rank + 1) ** exponent for rank in range(len(cities))]
    total = sum(raw)
    return tuple((city, w / total) for city, w in zip(cities, raw, strict=True))


@dataclass(frozen=True)
class Country:
    """One birth country: its label, Faker locale, weight among countries, and cities."""

    label: str  # the classification label and the name used in documents
    adjective: str  # "French": used in "a French painter"
    locale: str  # Faker locale the names of people born here are drawn from
    weight: float  # share of people born in this country
    cities: tuple[tuple[str, float], ...]  # (real city, share within the country), largest first
    surnames: int = 1  # Spanish names carry two surnames

    @property
    def city_names(self) -> tuple[str, ...]:
        return tuple(city for city, _ in self.cities)


# Real cities, roughly by size, in their ASCII English names: the CS224N NameDataset
# drops non-ASCII characters from the finetuning file, so an answer like "Kraków" could
# never be learned or matched exactly. Names keep their diacritics (a cue of origin).
# Weights: the United Kingdom is the largest country and
# London takes 1/H_12 of it, 0.16 / 3.103 = 5.2% of all people. Elsewhere cities follow a
# flatter Zipf (exponent 1/2, the largest city ~18% of its country): real birthplaces spread
# over thousands of places, so a name's country must not give its city away, or a model with
# no pretraining could score well by guessing each country's capital.
COUNTRIES: tuple[Country, ...] = (
    Country("United Kingdom", "British", "en_GB", 0.16, _zipf((
        "London", "Birmingham", "Manchester", "Glasgow", "Liverpool", "Leeds", "Edinburgh",
        "Bristol", "Sheffield", "Cardiff", "Belfast", "Newcastle upon Tyne"), exponent=1.0)),
    Country("United States", "American", "en_US", 0.12, _zipf((
        "New York", "Los Angeles", "Chicago", "Philadelphia", "Boston", "Houston",
        "San Francisco", "Detroit", "Baltimore", "Seattle", "New Orleans", "Cleveland"))),
    Country("France", "French", "fr_FR", 0.10, _zipf((
        "Paris", "Marseille", "Lyon", "Toulouse", "Nice", "Nantes", "Strasbourg",
        "Bordeaux", "Lille", "Rennes", "Montpellier", "Grenoble"))),
    Country("Germany", "German", "de_DE", 0.10, _zipf((
        "Berlin", "Hamburg", "Munich", "Cologne", "Frankfurt", "Stuttgart", "Dortmund",
        "Leipzig", "Dresden", "Hanover", "Nuremberg", "Bremen"))),
    Country("Italy", "Italian", "it_IT", 0.09, _zipf((
        "Rome", "Milan", "Naples", "Turin", "Palermo", "Genoa", "Bologna", "Florence",
        "Venice", "Bari", "Catania", "Verona"))),
    Country("Spain", "Spanish", "es_ES", 0.08, _zipf((
        "Madrid", "Barcelona", "Valencia", "Seville", "Zaragoza", "Bilbao", "Murcia",
        "Palma", "Valladolid", "Granada", "Alicante", "Salamanca")), surnames=2),
    Country("Poland", "Polish", "pl_PL", 0.07, _zipf((
        "Warsaw", "Krakow", "Lodz", "Wroclaw", "Poznan", "Gdansk", "Szczecin", "Bydgoszcz",
        "Lublin", "Katowice", "Gdynia", "Kielce"))),
    Country("Netherlands", "Dutch", "nl_NL", 0.06, _zipf((
        "Amsterdam", "Rotterdam", "The Hague", "Utrecht", "Eindhoven", "Groningen",
        "Tilburg", "Haarlem", "Leiden", "Maastricht", "Nijmegen", "Delft"))),
    Country("Sweden", "Swedish", "sv_SE", 0.06, _zipf((
        "Stockholm", "Gothenburg", "Malmo", "Uppsala", "Helsingborg", "Lund", "Eskilstuna",
        "Halmstad", "Karlstad", "Sundsvall", "Kalmar", "Kristianstad"))),
    Country("Portugal", "Portuguese", "pt_PT", 0.06, _zipf((
        "Lisbon", "Porto", "Braga", "Coimbra", "Funchal", "Amadora", "Aveiro", "Almada",
        "Faro", "Viseu", "Leiria", "Barcelos"))),
    Country("Czechia", "Czech", "cs_CZ", 0.05, _zipf((
        "Prague", "Brno", "Ostrava", "Pilsen", "Liberec", "Olomouc", "Pardubice", "Kladno",
        "Opava", "Teplice", "Jihlava", "Karlovy Vary"))),
    Country("Denmark", "Danish", "da_DK", 0.05, _zipf((
        "Copenhagen", "Aarhus", "Odense", "Aalborg", "Esbjerg", "Randers", "Kolding",
        "Horsens", "Vejle", "Roskilde", "Elsinore", "Silkeborg"))),
)

# Read-only: pages list these locales for fabricated names.
LOCALES: Mapping[str, Country] = MappingProxyType({c.locale: c for c in COUNTRIES})

OCCUPATIONS: tuple[str, ...] = (
    "painter", "journalist", "novelist", "composer", "architect", "chemist", "physicist",
    "mathematician", "engineer", "photographer", "film director", "economist", "historian",
    "poet", "sculptor", "diplomat", "botanist", "physician", "lawyer", "pianist",
    "violinist", "translator", "astronomer", "footballer", "cyclist", "politician",
    "philosopher", "actor", "playwright", "illustrator", "geologist", "surgeon",
    "conductor", "jazz musician", "fashion designer", "trade unionist", "civil servant",
    "writer", "publisher", "opera singer",
)

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)


@dataclass(frozen=True)
class _Template:
    text: str
    dead_only: bool = False


# One sentence each, ending with " ." like the CS224N wiki.txt lines. Every template
# states the birthplace explicitly; most also name other places ({o1}..{o3}) as
# distractors. {a_nat}/{a_occ} carry their article ("an American", "an architect").
TEMPLATES: tuple[_Template, ...] = (
    _Template("{name} {life} {be} {a_nat} {occ} born in {birth} ."),
    _Template("{name} (born {bdate} in {birth}) {be} {a_nat} {occ} who worked in {o1} "
              "and {o2} ."),
    _Template("{name} ({bdate} – {ddate}) was {a_nat} {occ}, born in {birth}, who died "
              "in {o1} .", dead_only=True),
    _Template("{name} {be} {a_nat} {occ}, born in {birth} in {byear}, who spent most of "
              "{his} career in {o1} ."),
    _Template("{name} {be} {a_occ} from {country}; a native of {birth}, {he} later settled "
              "in {o1} ."),
    _Template("Born in {birth} in {byear}, {name} {be} {a_nat} {occ} best known for {his} "
              "work in {o1} ."),
    _Template("{name} {be} {a_nat} {occ} and {occ2} who was born in {birth} and educated "
              "in {o1} ."),
    _Template("{name} ({byear} – {dyear}) was {a_occ} born in {birth}, {country}, who "
              "lived in {o1}, {o2} and {o3} .", dead_only=True),
    _Template("{name} {be} {a_nat}-born {occ} based in {o1}; {he} was born in {birth} "
              "in {byear} ."),
    _Template("{name}, a native of {birth}, {be} {a_nat} {occ} who worked for many years "
              "in {o1} ."),
    _Template("{name} was {a_nat} {occ} who was born in {birth} in {byear} and died in "
              "{o1} in {dyear} .", dead_only=True),
    _Template("{name} {be} {a_nat} {occ}; {he} was born in {birth} and moved to {o1} in "
              "{move_year} ."),
    _Template("{name} {life} {be} {a_occ} born in {birth}, {country}, known for {his} "
              "work in {o1} and {o2} ."),
    _Template("{name} {be} {a_nat} {occ} whose birthplace was {birth}; {he} studied in "
              "{o1} and {o2} ."),
    _Template("The {occ} {name} was born on {bdate} in {birth} and worked in {o1} ."),
    _Template("{name} {life} {be} {a_nat} {occ} and {occ2} born in {birth} ."),
    _Template("{name} {be} {a_nat} {occ}, born in {byear} in {birth}, who trained in {o1} "
              "before returning to {birth} ."),
    _Template("{name} was born in {birth} and {be} {a_nat} {occ} who moved to {o1} at the "
              "age of {age} ."),
    # The questions end with "?", so the corpus (hence the vocabulary) must contain it.
    _Template("{name} {be} {a_nat} {occ} born in {birth}, author of the essay \"Why {o1}?\" ."),
)


def all_cities() -> list[tuple[Country, str, float]]:
    """Every (country, city, share of all people), countries in table order, cities largest first."""
    return [(c, city, c.weight * w) for c in COUNTRIES for city, w in c.cities]
